"""Real builds and boots on 6.1 of series whose effect shows only when their own code runs: a
Makefile-only series that breaks the build, and the tun consume-helper series (tests/support/ring_series.py)
with its wake done right, done outside an RCU read-side section, or missing.

Like tests/test_build_boot.py, every build here shares the cache's configured 6.1 build directory; the
series' commits have fixed dates, so their kernels are built once per machine. The three tun series
share their first two commits (helper, stop when full): four kernels in all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_tool
from tests.support import kernel
from tests.support.planted import plant
from tests.support.ring_series import commit_series, tun_boot_series

pytestmark = [pytest.mark.slow, pytest.mark.kernel]
CHECKOUT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def base(kernel_tree):
    for tool in ("make", "gcc", "ccache", "bwrap", "qemu-system-x86_64", "flex", "bison", "bc", "busybox"):
        require_tool(tool)
    return kernel.base_commit(kernel_tree)


@pytest.fixture(scope="module")
def results_db(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("results") / "results.sqlite"


def patchbench(*args: str) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "patchbench", *args, "--format", "json"], cwd=CHECKOUT,
                          capture_output=True, text=True, timeout=3600, env={**os.environ})
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def boot(kernel_tree: Path, base: str, wake: str, results_db: Path, *extra: str) -> tuple[int, dict]:
    head = commit_series(kernel_tree, base, tun_boot_series(wake))
    return patchbench("boot", f"{base}..{head}", "--tree", str(kernel_tree), "--results", str(results_db), *extra)


def coverage_of(job: dict) -> dict[str, dict]:
    return {f["function"]: f for f in job["coverage"]["functions"]}


def test_a_series_that_only_breaks_a_makefile_fails_its_build_job(kernel_tree, base, results_db):
    head, _ = plant(kernel_tree, "makefile-break", base)
    code, report = patchbench("build", f"{base}..{head}", "--tree", str(kernel_tree), "--results", str(results_db))
    (job,) = report["jobs"]
    assert code == 1 and job["status"] == "fail", job
    assert job["directories"] == ["drivers/net/"]
    assert job["reason"].startswith("drivers/net/ no longer builds:") and "tun_offload.o" in job["reason"], job


def test_a_patch_that_breaks_a_later_patchs_object_fails_its_own_build_job(kernel_tree, base, results_db):
    head, _ = plant(kernel_tree, "rename-breaks-later-object", base)
    code, report = patchbench("build", f"{base}..{head}", "--tree", str(kernel_tree), "--results", str(results_db))
    first, second = report["jobs"]
    # tun.o is compiled for patch 1 whether or not it is among the header's first includers the
    # build slot knows (that depends on what the slot built before): it is patch 2's object.
    assert "drivers/net/tun.o" in first["objects"], first
    assert code == 1 and first["status"] == "fail", first
    assert first["reason"] == "no longer compiles: drivers/net/tun.o", first
    assert second["status"] == "pass", second


def test_a_kconfig_only_series_has_its_new_symbols_reported_and_enabled_where_they_can_be(kernel_tree, base,
                                                                                         results_db):
    head, _ = plant(kernel_tree, "kconfig-symbols", base)
    code, report = patchbench("build", f"{base}..{head}", "--tree", str(kernel_tree), "--results", str(results_db))
    (job,) = report["jobs"]
    assert code == 0 and job["status"] == "pass", job
    assert job["new_symbols"] == ["CONFIG_TUN_RING_PCI: not enabled (unmet dependencies)",
                                  "CONFIG_TUN_RING_STATS: enabled"]


def test_the_helper_dereferencing_outside_a_read_side_section_splats_in_the_helper(kernel_tree, base, results_db):
    code, report = boot(kernel_tree, base, "bare", results_db)
    kernel_job, boot_job = report["jobs"]
    assert kernel_job["status"] == "pass", kernel_job
    assert code == 1 and boot_job["status"] == "fail", boot_job
    assert boot_job["fingerprint"].startswith("RCU:tun_ring_consume|"), boot_job
    assert "suspicious RCU usage" in boot_job["reason"]
    assert boot_job["exercises"] == ["tun-ring"]


def test_the_series_done_right_passes_and_its_helper_ran(kernel_tree, base, results_db):
    code, report = boot(kernel_tree, base, "rcu", results_db)
    boot_job = report["jobs"][-1]
    console = Path(boot_job["console"]).read_text()
    assert code == 0 and boot_job["status"] == "pass", boot_job["reason"] + console[-3000:]
    ran = coverage_of(boot_job)
    assert ran["tun_ring_consume"]["status"] == "ran" and ran["tun_ring_consume"]["calls"] > 100, ran
    assert ran["tun_ring_consume"]["patches"] == [1, 3]
    assert ran["tun_net_xmit"]["status"] == "ran", ran
    assert "tun_ring: pbring0: read" in console


def test_a_stop_without_a_wake_stalls_the_queue_on_its_patch(kernel_tree, base, results_db):
    code, report = boot(kernel_tree, base, "none", results_db, "--boot-each")
    boots = [j for j in report["jobs"] if j["kind"] == "boot"]
    assert [(j["patch"], j["status"]) for j in boots] == [(1, "pass"), (2, "fail")], boots
    assert code == 1 and boots[1]["fingerprint"] == "STALL:tun|tx-queue", boots[1]
    assert report["first_failing_boot"]["patch"] == 2
    assert coverage_of(boots[0])["tun_ring_consume"]["status"] == "ran"
