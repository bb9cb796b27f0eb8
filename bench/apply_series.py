"""Apply a 3-patch series to the Linux 6.1 tree: patchbench's private index vs `git am` in a worktree.

Target: patchbench applies the series in under 1 s of wall time. `git am` needs a checkout, so it
is timed beside it together with the `git worktree add` that any checkout-based apply pays first.
Run from the project root: `python bench/apply_series.py [--rounds N]`.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchbench.series import load_series  # noqa: E402
from patchbench.tree import apply_series  # noqa: E402
from tests.support.git_series import commit_files, format_patch, git  # noqa: E402
from tests.support.kernel import TAG, kernel_repo  # noqa: E402

EDITS = [
    ("drivers/net/tun.c", '#define DRV_VERSION\t"1.6"', '#define DRV_VERSION\t"1.7"', "tun: bump the driver version"),
    ("drivers/net/tun.c", "/* Net device open. */", "/* Net device open: start every tx queue. */",
     "tun: say what open does"),
    ("drivers/net/tap.c", 'MODULE_LICENSE("GPL");', 'MODULE_LICENSE("GPL");\nMODULE_DESCRIPTION("tap");',
     "tap: describe the module"),
]


def make_series(author: Path, out: Path) -> str:
    base = parent = git(author, "rev-parse", TAG)
    for path, old, new, subject in EDITS:
        content = git(author, "show", f"{parent}:{path}") + "\n"
        parent = commit_files(author, parent, {path: content.replace(old, new, 1).encode()},
                              f"{subject}\n\nSigned-off-by: Ada Series <ada@example.org>")
    format_patch(author, base, parent, out)
    return base


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="patchbench apply runs to time (default 5)")
    args = parser.parse_args()
    kernel = kernel_repo()
    work = Path(tempfile.mkdtemp(prefix="bench-apply-"))
    try:
        author, user = work / "author", work / "user"
        git(work, "clone", "-q", "--shared", "--no-checkout", str(kernel), str(author))
        git(work, "clone", "-q", "--shared", "--no-checkout", str(kernel), str(user))
        base = make_series(author, work / "mails")
        series = load_series(str(work / "mails"))
        runs = []
        for _ in range(args.rounds):
            for ref in git(user, "for-each-ref", "--format=%(refname)", "refs/patchbench/").split():
                git(user, "update-ref", "-d", ref)
            start = time.perf_counter()
            result = apply_series(series, user)
            runs.append(time.perf_counter() - start)
            assert result.failed is None and len(result.applied) == 3
        cli = []
        for _ in range(3):
            for ref in git(user, "for-each-ref", "--format=%(refname)", "refs/patchbench/").split():
                git(user, "update-ref", "-d", ref)
            cli.append(timed(lambda: subprocess.run(
                [sys.executable, "-m", "patchbench", "apply", str(work / "mails"), "--tree", str(user)],
                check=True, capture_output=True, cwd=Path(__file__).resolve().parents[1])))
        worktree = work / "am"
        checkout = timed(lambda: git(author, "worktree", "add", "-q", "--detach", str(worktree), base))
        mails = sorted(str(p) for p in (work / "mails").glob("0*.patch") if not p.name.startswith("0000"))
        am = timed(lambda: git(worktree, "am", "-q", *mails))
        same = git(worktree, "rev-parse", "HEAD^{tree}") == git(user, "rev-parse", result.head + "^{tree}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    files = git(kernel, "ls-tree", "-r", "--name-only", TAG).count("\n") + 1
    print(f"tree: Linux 6.1 ({files} files), series: 3 patches (drivers/net/tun.c, drivers/net/tap.c)")
    print(f"patchbench apply_series   median {statistics.median(runs):.3f} s   "
          f"min {min(runs):.3f} s   max {max(runs):.3f} s   ({args.rounds} runs; target < 1 s)")
    print(f"patchbench apply (command)  median {statistics.median(cli):.3f} s   (3 runs: interpreter start, "
          f"imports, mail reading and apply)")
    print(f"git worktree add (checkout) {checkout:.3f} s")
    print(f"git am in that worktree     {am:.3f} s   (checkout + am {checkout + am:.3f} s)")
    print(f"same final tree as git am:  {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
