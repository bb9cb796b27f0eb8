"""Real builds and boots of the 6.1 netdev kernel: planted series must be caught, clean ones pass.

The build directory lives in the patchbench cache (~/.cache/patchbench, or $PATCHBENCH_CACHE) so
every test here, and every later run on this machine, reuses one configured O= tree and its ccache:
only the first test pays for the full kernel build.
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

pytestmark = [pytest.mark.slow, pytest.mark.kernel]
CHECKOUT = Path(__file__).resolve().parents[1]
SERIES = ("warning-series", "warn-at-boot", "hang-at-boot", "compile-error")


@pytest.fixture(scope="module")
def planted(kernel_tree):
    for tool in ("make", "gcc", "ccache", "bwrap", "qemu-system-x86_64", "flex", "bison", "bc"):
        require_tool(tool)
    base = kernel.base_commit(kernel_tree)
    return base, {name: plant(kernel_tree, name, base) for name in SERIES}


@pytest.fixture(scope="module")
def results_db(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("results") / "results.sqlite"


def patchbench(*args: str, timeout: float = 3600) -> tuple[int, dict, str]:
    """The real command line, as a user runs it; returns exit code, JSON report and stderr."""
    proc = subprocess.run([sys.executable, "-m", "patchbench", *args, "--format", "json"], cwd=CHECKOUT,
                          capture_output=True, text=True, timeout=timeout, env={**os.environ})
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_only_the_new_warning_is_reported_on_the_patch_that_added_it(kernel_tree, planted, results_db):
    base, series = planted
    head, commits = series["warning-series"]
    code, report, _ = patchbench("build", f"{base}..{head}", "--tree", str(kernel_tree), "--results", str(results_db))
    assert code == 1
    first, second, third = report["jobs"]
    assert [j["commit"] for j in report["jobs"]] == commits
    assert (first["status"], second["status"], third["status"]) == ("fail", "fail", "pass")
    assert [(w["function"], w["flag"], w["message"]) for w in first["new_warnings"]] == [
        ("tun_chr_open", "-Wunused-variable", "unused variable 'open_count'")]
    # Patch 2 fixes that warning and adds another: a warning count would not change, we still see it.
    assert [(w["function"], w["message"]) for w in second["new_warnings"]] == [
        ("tun_init", "unused variable 'init_count'")]
    assert [w["function"] for w in second["fixed_warnings"]] == ["tun_chr_open"]
    assert third["new_warnings"] == [] and third["objects"] == ["drivers/net/tun.o"]


def test_a_patch_that_breaks_the_build_fails_with_the_error(kernel_tree, planted, results_db):
    base, series = planted
    head, _ = series["compile-error"]
    code, report, _ = patchbench("build", f"{base}..{head}", "--tree", str(kernel_tree), "--results", str(results_db))
    (job,) = report["jobs"]
    assert code == 1 and job["status"] == "fail"
    assert job["reason"] == "no longer compiles: drivers/net/tun.o"
    assert [(w["kind"], w["function"]) for w in job["new_warnings"]] == [("error", "tun_init")]
    assert "tun.c" in Path(job["log"]).read_text()


def test_a_clean_head_boots_and_moves_packets(kernel_tree, planted, results_db):
    base, series = planted
    head, _ = series["warning-series"]  # it adds a compiler warning but nothing a boot would notice
    code, report, _ = patchbench("boot", f"{base}..{head}", "--tree", str(kernel_tree), "--results", str(results_db))
    kernel_job, boot_job = report["jobs"]
    assert kernel_job["status"] == "pass" and Path(kernel_job["image"]).is_file()
    console = Path(boot_job["console"]).read_text()
    assert boot_job["status"] == "pass", boot_job["reason"] + console[-3000:]
    assert code == 0
    assert "tun_echo: pbtun0 ready" in console and "PATCHBENCH-SMOKE: PASS" in console
    assert boot_job["accel"] in ("kvm", "tcg")


def test_a_warn_at_boot_fails_with_its_fingerprint_and_is_recognised_again(kernel_tree, planted, results_db):
    base, series = planted
    head, _ = series["warn-at-boot"]
    args = ("boot", f"{base}..{head}", "--tree", str(kernel_tree), "--results", str(results_db))
    code, report, _ = patchbench(*args)
    boot_job = report["jobs"][-1]
    assert code == 1 and boot_job["status"] == "fail"
    assert boot_job["fingerprint"].startswith("WARNING:tun_init|do_one_initcall"), boot_job
    assert "drivers/net/tun.c" in boot_job["reason"]
    _, again, _ = patchbench(*args)
    assert again["jobs"][-1]["fingerprint"] == boot_job["fingerprint"]
    assert again["jobs"][-1]["seen_before"] == [head]


def test_a_boot_hang_is_killed_and_fingerprinted(kernel_tree, planted, results_db):
    base, series = planted
    head, _ = series["hang-at-boot"]
    code, report, _ = patchbench("boot", f"{base}..{head}", "--tree", str(kernel_tree), "--results", str(results_db),
                                 "--boot-timeout", "15")
    boot_job = report["jobs"][-1]
    assert code == 1 and boot_job["status"] == "fail"
    assert "hung, killed after" in boot_job["reason"]
    assert boot_job["fingerprint"].startswith("HUNG_TASK:"), boot_job
    assert "tun_init" in boot_job["fingerprint"]


def test_results_command_lists_the_jobs(planted, results_db):
    proc = subprocess.run([sys.executable, "-m", "patchbench", "results", "--db", str(results_db),
                           "--status", "fail", "--format", "json"], cwd=CHECKOUT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    kinds = {(row["kind"], row.get("scope")) for row in json.loads(proc.stdout)}
    assert ("build", "objects") in kinds and ("boot", None) in kinds


def test_run_reports_findings_and_build_jobs_together(kernel_tree, planted, results_db, tmp_path):
    base, series = planted
    head, _ = series["warning-series"]
    subprocess.run(["git", "-C", str(kernel_tree), "format-patch", "-q", "-o", str(tmp_path / "series"),
                    f"{base}..{head}"], check=True)
    code, report, _ = patchbench("run", str(tmp_path / "series"), "--tree", str(kernel_tree), "--base", base,
                                 "--build", "--results", str(results_db))
    assert code == 1
    assert "findings" in report and [p["index"] for p in report["patches"]] == [1, 2, 3]
    by_patch = {j["patch"]: j for j in report["jobs"]}
    assert [w["message"] for w in by_patch[2]["new_warnings"]] == ["unused variable 'init_count'"]
    assert by_patch[3]["status"] == "pass"
