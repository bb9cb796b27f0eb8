"""Series per minute through `patchbench bot` (static checks only), against the stand-in patchwork.

N two-patch series on the 6.1 tree (half clean, half with the unlocked tap_ring_consume(); each
series differs by a line in its commit messages' context so that none is a repeat) are posted to
the stand-in patchwork server of the tests; one `patchbench bot --once` process (cold: a fresh
PATCHBENCH_CACHE, database and pages directory) downloads, applies, checks and posts them all.
Prints the wall time of that whole process and series per minute; checks posted are counted to
show the work was done. Run from the project root: `python bench/bot.py [--series N]`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.bot_queue import LIST_ID, PROJECT, mails  # noqa: E402
from tests.support.git_series import git  # noqa: E402
from tests.support.kernel import TAG, kernel_repo  # noqa: E402
from tests.support.patchwork_server import TOKEN, PatchworkServer  # noqa: E402
from tests.support.ring_series import TAP_HELPER, TAP_HELPER_NO_LOCK, TUN_HELPER, tap_patch, tun_patch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="patchbench-bench-bot-") as scratch:
        root = Path(scratch)
        repo = root / "linux"
        git(root, "clone", "-q", "--shared", "--no-checkout", str(kernel_repo("6.1")), str(repo))
        base = git(repo, "rev-parse", TAG)
        posted = []
        for n in range(args.series):
            tap = TAP_HELPER_NO_LOCK if n % 2 else TAP_HELPER
            # a different helper comment per series: distinct blobs, so no series is served from the cache
            marker = f"/* series {n} */\n"
            tun_path, tun_subject, tun_edits = tun_patch(TUN_HELPER)
            tun_edits = [(old, new.replace("static void *tun_ring_consume", marker + "static void *tun_ring_consume", 1))
                         for old, new in tun_edits]
            posted.append(mails(repo, base, [(tun_path, tun_subject, tun_edits), tap_patch(tap)], root / f"m{n}",
                                title=f"tun, tap: consumer lock helper, take {n}"))
        (root / "token").write_text(TOKEN)
        (root / "bot.toml").write_text(f'[projects.{PROJECT}.trees]\nnet-next = "{base}"\n')
        with PatchworkServer(validate=False) as pw:
            pw.add_project(PROJECT, LIST_ID)
            for series in posted:
                pw.add_series(PROJECT, series)
            env = {**os.environ, "PYTHONPATH": str(ROOT), "PATCHBENCH_CACHE": str(root / "cache")}
            started = time.monotonic()
            result = subprocess.run([sys.executable, "-m", "patchbench", "bot", "--patchwork", pw.url,
                                     "--project", PROJECT, "--tree", str(repo), "--token-file", str(root / "token"),
                                     "--config", str(root / "bot.toml"), "--db", str(root / "bot.sqlite"),
                                     "--pages", str(root / "pages"), "--stages", "check", "--once"],
                                    cwd=ROOT, env=env, capture_output=True, text=True)
            seconds = time.monotonic() - started
            if result.returncode != 0:
                sys.exit(f"bot failed ({result.returncode}): {result.stderr[-2000:]}")
            checks = pw.all_checks()
        print(f"series: {args.series} (2 patches each), checks posted: {len(checks)}")
        print(f"bot --once, cold: {seconds:.1f} s wall, {args.series / seconds * 60:.1f} series per minute")


if __name__ == "__main__":
    main()
