"""Same input, same output: real kernel files linted in fresh processes under several hash seeds and
worker counts, and through a cold and a warm facts cache, give byte-identical reports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = ["drivers/net/tun.c", "drivers/net/tap.c", "drivers/net/virtio_net.c", "drivers/net/veth.c",
         "drivers/net/macvlan.c", "net/core/rtnetlink.c", "net/core/dev.c", "net/sched/cls_api.c",
         "net/sched/sch_generic.c", "net/ipv4/tcp_ipv4.c",
         # files with findings on both kernels (RCU inherited entry states, a lock-imbalance), so
         # that the comparison is of reports that say something
         "drivers/net/net_failover.c", "drivers/net/amt.c", "net/ipv4/ip_sockglue.c"]
# (PYTHONHASHSEED, --jobs, --no-cache)
RUNS = [("0", "1", True), ("1", "1", True), ("2", "1", True), ("3", "2", True), ("4", "2", True),
        ("5", "2", False), ("6", "1", False)]   # the last two: a cold then a warm facts cache


def _lint(tree: Path, cache: Path, seed: str, jobs: str, no_cache: bool) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": seed, "PATCHBENCH_CACHE": str(cache)}
    argv = [sys.executable, "-m", "patchbench", "lint", "--format", "terse", "--jobs", jobs,
            *(["--no-cache"] if no_cache else []), *(str(tree / path) for path in FILES)]
    return subprocess.run(argv, capture_output=True, env=env, timeout=900)


@pytest.mark.kernel
@pytest.mark.parametrize("version", ["6.1", "newest"])
def test_findings_do_not_depend_on_hash_seed_workers_or_cache(version, kernel_tree, kernel_tree_new, tmp_path):
    tree = kernel_tree if version == "6.1" else kernel_tree_new
    outputs = {}
    for seed, jobs, no_cache in RUNS:
        proc = _lint(tree, tmp_path / "cache", seed, jobs, no_cache)
        assert proc.returncode in (0, 1), proc.stderr.decode()
        outputs[(seed, jobs, no_cache)] = proc.stdout
    first = outputs[RUNS[0]]
    assert first.count(b"\n") >= 1, "these files have findings: a comparison of empty reports proves nothing"
    for run, output in outputs.items():
        assert output == first, f"PYTHONHASHSEED={run[0]} --jobs {run[1]} no-cache={run[2]} differs"
