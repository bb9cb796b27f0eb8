"""Time each netdev per-patch check adds to `patchbench check` of a 3-patch series on the 6.1 tree.

The series is the seeds' tun/tap_ring_consume one (tests/support/ring_series.py). Each
configuration is a whole `python -m patchbench check` process with a fresh facts cache
(PATCHBENCH_CACHE, cold) and a fresh scratch tree for the scripts (always): `--checks rules` is
the baseline, `--checks rules,<check>` adds one check, `--checks all` adds them all. Printed: the
median wall time of REPEAT runs, what it adds to the baseline, and the check's own seconds from
the JSON report. Target: all seven together add under 5 s.
Run from the project root: `python bench/patchchecks.py`. Needs perl.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from patchbench.patchchecks import checks  # noqa: E402
from tests.support.git_series import format_patch, git  # noqa: E402
from tests.support.kernel import TAG, kernel_repo  # noqa: E402
from tests.support.ring_series import (TAP_HELPER, TUN_HELPER, WAKE_PATCH, commit_series,  # noqa: E402
                                       tap_patch, tun_patch)

REPEAT = 3
TARGET = 5.0


def check_once(mails: Path, clone: Path, selection: str, work: Path) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory(dir=work) as cache:
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "patchbench", "check", str(mails), "--tree", str(clone),
                               "--format", "json", "--checks", selection], capture_output=True, text=True,
                              cwd=ROOT, env={**os.environ, "PATCHBENCH_CACHE": cache, "PYTHONPATH": str(ROOT)})
        seconds = time.monotonic() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"check --checks {selection} failed: {proc.stderr.strip()}")
    return seconds, {c["id"]: c["seconds"] for c in json.loads(proc.stdout)["checks"]}


def median_run(mails: Path, clone: Path, selection: str, work: Path) -> tuple[float, dict]:
    runs = [check_once(mails, clone, selection, work) for _ in range(REPEAT)]
    wall = statistics.median(seconds for seconds, _ in runs)
    own = {key: statistics.median(r[key] for _, r in runs) for key in runs[0][1]}
    return wall, own


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="patchbench-bench-") as tmp:
        work = Path(tmp)
        clone = work / "linux"
        git(work, "clone", "-q", "--shared", "--no-checkout", str(kernel_repo("6.1")), str(clone))
        base = git(clone, "rev-parse", TAG)
        tip = commit_series(clone, base, [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER), WAKE_PATCH])
        mails = work / "series"
        format_patch(clone, base, tip, mails)
        baseline, _ = median_run(mails, clone, "rules", work)
        print(f"patchbench check, 3-patch series, 6.1 tree, cold facts cache, median of {REPEAT}")
        print(f"{'--checks':<28} {'wall s':>7} {'added s':>8} {'check s':>8}")
        print(f"{'rules (baseline)':<28} {baseline:7.2f} {'':>8} {'':>8}")
        for module in checks():
            wall, own = median_run(mails, clone, f"rules,{module.ID}", work)
            print(f"{'rules,' + module.ID:<28} {wall:7.2f} {wall - baseline:8.2f} {own[module.ID]:8.2f}")
        wall, _ = median_run(mails, clone, "all", work)
        added = wall - baseline
        print(f"{'all':<28} {wall:7.2f} {added:8.2f} {'':>8}")
        print(f"all seven checks add {added:.2f} s (target under {TARGET:.0f} s): "
              f"{'met' if added < TARGET else 'NOT met'}")


if __name__ == "__main__":
    main()
