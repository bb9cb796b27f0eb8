"""The pre-send gate's time: what `git send-email` spends in our sendemail-validate hook.

On a shared clone of the 6.1 tree, for a 3-patch series (the seeds' tun/tap ring series) and a
15-patch one (that series plus 12 patches to four other drivers/net files), committed on the branch
HEAD is on, as when sending from one's branch. Each figure is whole processes, as git runs them:
  - counted: one hook process per file (cover letter + patches) with git >= 2.41's
    GIT_SENDEMAIL_FILE_COUNTER/_TOTAL; the series is checked once, at the last file.
    Cold (empty facts cache) and warm.
  - per patch: the same files without the counters (git < 2.41, as Debian 12's git 2.39), one
    hook process each as git runs them (one parent: one send): the first patch's run judges the
    later files too, on top of the ones before each, and theirs replay its outcome; warm.
  - per patch, files only: the same, HEAD moved back to the base (the files made earlier, the
    commits on no branch HEAD is on), warm.
  - git send-email --dry-run of the series with the hook installed minus without it: the hook's
    time inside the real tool (per-patch or counted, whichever this git does), warm.
Targets (issue 10): 3 patches under 2 s warm, 15 patches under 5 s. Each line says how wall time
and CPU time (the processes' own and their children's) compare with them: on a shared machine
wall time includes waiting for a core; the first line's Python baseline shows how busy it is.
Run from the project root: `python bench/presend.py`. Needs git send-email (Debian: git-email).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.git_series import commit_files, format_patch, git  # noqa: E402
from tests.support.kernel import TAG, kernel_repo  # noqa: E402
from tests.support.ring_series import TAP_HELPER, TUN_HELPER, WAKE_PATCH, commit_series, tap_patch, tun_patch  # noqa: E402

RING = [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER), WAKE_PATCH]
MORE_FILES = ["drivers/net/veth.c", "drivers/net/virtio_net.c", "drivers/net/vxlan/vxlan_core.c",
              "drivers/net/bonding/bond_main.c"]
TARGETS = {3: 2.0, 15: 5.0}


def helper(n: int) -> str:
    return (f"\nstatic void __maybe_unused presend_bench_{n}(spinlock_t *lock, unsigned long *count)\n"
            f"{{\n\tspin_lock(lock);\n\t(*count)++;\n\tspin_unlock(lock);\n}}\n")


def series(repo: Path, base: str, size: int) -> str:
    """The ring series, then patches each adding a small locked helper to one of MORE_FILES; the tip."""
    tip = commit_series(repo, base, RING[:size])
    for n in range(len(RING), size):
        path = MORE_FILES[n % len(MORE_FILES)]
        content = git(repo, "show", f"{tip}:{path}") + "\n" + helper(n)
        tip = commit_files(repo, tip, {path: content.encode()},
                           f"net: presend bench helper {n}\n\nSigned-off-by: Ada Series <ada@example.org>")
    return tip


def run_timed(runs: list[tuple[list[str], dict]], cwd: Path) -> tuple[float, float, list[int]]:
    """(wall s, CPU s of the children, exit codes) of running the processes one after another."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    codes = [subprocess.run(argv, cwd=cwd, env=env, capture_output=True).returncode for argv, env in runs]
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), codes


def hook_runs(files: list[Path], env: dict, counted: bool) -> list[tuple[list[str], dict]]:
    argv = [sys.executable, "-m", "patchbench", "hook", "sendemail-validate"]
    return [([*argv, str(path)], {**env, **({"GIT_SENDEMAIL_FILE_COUNTER": str(n), "GIT_SENDEMAIL_FILE_TOTAL":
                                              str(len(files))} if counted else {})})
            for n, path in enumerate(files, 1)]


def send_dry_run(repo: Path, files: list[Path], env: dict) -> tuple[float, float, list[int]]:
    argv = ["git", "send-email", "--dry-run", "--confirm=never", "--suppress-cc=all", "--quiet",
            "--from=Ada Series <ada@example.org>", "--to=netdev@example.org", *map(str, files)]
    return run_timed([(argv, env)], repo)


def main() -> None:
    kernel = kernel_repo("6.1")
    with tempfile.TemporaryDirectory(prefix="bench-presend-") as scratch:
        work = Path(scratch)
        repo = work / "linux"
        git(work, "clone", "-q", "--shared", "--no-checkout", str(kernel), str(repo))
        base = git(repo, "rev-parse", TAG)
        git(repo, "update-ref", "refs/heads/bench-base", base)
        # as installed: bytecode cached (compiling patchbench's sources in every hook process costs more
        # than its check of a patch)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=str(ROOT), PATCHBENCH_CACHE=str(work / "cache"), GIT_DIR=str(repo / ".git"),
                   GIT_AUTHOR_NAME="Ada Series", GIT_AUTHOR_EMAIL="ada@example.org",
                   GIT_COMMITTER_NAME="Ada Series", GIT_COMMITTER_EMAIL="ada@example.org")
        has_send_email = (Path(git(repo, "--exec-path")) / "git-send-email").exists()
        print(f"git {git(repo, '--version').split()[-1]}; {os.cpu_count()} CPUs; "
              f"load average {os.getloadavg()[0]:.1f} at start")
        wall, cpu, _ = run_timed([([sys.executable, "-c", "pass"], env)] * 10, work)
        print(f"baseline, a Python process doing nothing: {wall / 10:.3f} s wall, {cpu / 10:.3f} s CPU")
        for size in TARGETS:
            tip = series(repo, base, size)
            git(repo, "update-ref", f"refs/heads/bench-{size}", tip)
            git(repo, "symbolic-ref", "HEAD", f"refs/heads/bench-{size}")
            files = format_patch(repo, base, tip, work / f"mails-{size}")
            files[0].write_text(files[0].read_text().replace("*** SUBJECT HERE ***", "net: bench series"))
            env["PATCHBENCH_CACHE"] = str(work / f"cache-{size}")
            cold = run_timed(hook_runs(files, env, counted=True), repo)
            warm = run_timed(hook_runs(files, env, counted=True), repo)
            alone = run_timed(hook_runs(files, env, counted=False), repo)
            git(repo, "symbolic-ref", "HEAD", "refs/heads/bench-base")
            files_only = run_timed(hook_runs(files, env, counted=False), repo)
            git(repo, "symbolic-ref", "HEAD", f"refs/heads/bench-{size}")
            print(f"{size} patches ({len(files)} files with the cover letter), target {TARGETS[size]:g} s:")
            for name, (wall, cpu, codes) in (("counted, cold", cold), ("counted, warm", warm),
                                             ("per patch, warm", alone), ("per patch, files only", files_only)):
                verdict = "/".join("ok" if t < TARGETS[size] else "over" for t in (wall, cpu))
                print(f"  hook {name:21} {wall:5.2f} s wall, {cpu:5.2f} s CPU, exits {sorted(set(codes))} "
                      f"[wall/CPU vs target: {verdict}]")
            if has_send_email:
                hooks = repo / ".git" / "hooks"
                without = send_dry_run(repo, files, env)
                subprocess.run([sys.executable, "-m", "patchbench", "hook", "install", "--repo", str(repo)],
                               env=env, check=True, capture_output=True)
                with_hook = send_dry_run(repo, files, env)
                (hooks / "sendemail-validate").unlink()
                print(f"  git send-email --dry-run: {with_hook[0]:.2f} s with the hook, {without[0]:.2f} s without: "
                      f"the hook's share {with_hook[0] - without[0]:.2f} s wall, {with_hook[1] - without[1]:.2f} s CPU "
                      f"(exit {with_hook[2][0]})")
            else:
                print("  git send-email not installed (Debian: git-email): no dry-run figure")
        print(f"load average {os.getloadavg()[0]:.1f} at the end (2 cores shared: wall figures include waiting)")


if __name__ == "__main__":
    main()
