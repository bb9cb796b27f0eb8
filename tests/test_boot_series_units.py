"""What a series changed, and what its boot must therefore run and count, without building a kernel:
changed functions and Kconfig symbols from git, the exercises table, the guest's coverage and stall
lines, the per-patch plan of --boot-each."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

from patchbench.dispatch import changes, console, coverage, exercise, initramfs
from patchbench.dispatch.boot import judge
from patchbench.dispatch.build import directories_for
from patchbench.dispatch.jobs import BootJob, JobResult, KernelJob, ObjectsJob, Target
from patchbench.dispatch.runner import plan
from patchbench.report import jobs as jobs_report
from patchbench.tree import AppliedPatch, ApplyResult
from tests.conftest import require_tool
from tests.support.git_series import commit_files

DRIVER = """static int helper(int x)
{
	return x + 1;
}

int driver_xmit(int x)
{
	return helper(x);
}

int driver_probe(void)
{
	return 0;
}
"""


def _series(tmp_path: Path) -> tuple[Path, str, list[str]]:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    base = commit_files(repo, None, {"drivers/net/drv.c": DRIVER.encode(),
                                     "drivers/net/Kconfig": b"config DRV\n\ttristate \"drv\"\n"}, "base")
    first = commit_files(repo, base, {"drivers/net/drv.c": DRIVER.replace("x + 1", "x + 2").encode()}, "helper")
    second = commit_files(repo, first, {
        "drivers/net/drv.c": DRIVER.replace("x + 1", "x + 2").replace("\treturn 0;\n", "\treturn 1;\n").encode(),
        "drivers/net/Kconfig": b"config DRV\n\ttristate \"drv\"\n\nconfig DRV_FAST\n\tbool \"fast\"\n"}, "probe+fast")
    return repo, base, [first, second]


def test_the_functions_each_patch_changed_and_the_symbols_it_added(tmp_path):
    repo, base, (first, second) = _series(tmp_path)
    assert [(f.file, f.name) for f in changes.changed_functions(repo, base, first, ["drivers/net/drv.c"])] == [
        ("drivers/net/drv.c", "helper")]
    assert changes.added_symbols(repo, base, second) == ["CONFIG_DRV_FAST"]
    assert changes.added_symbols(repo, base, first) == []
    functions = coverage.series_functions(repo, ((1, base, first), (2, first, second)))
    assert [(f.function, f.patches) for f in functions] == [("helper", [1]), ("driver_probe", [2])]


def test_coverage_says_what_ran_what_did_not_and_what_cannot_be_counted():
    functions = [coverage.FunctionCoverage("tun_ring_consume", "drivers/net/tun.c", [1, 3]),
                 coverage.FunctionCoverage("tap_ring_consume", "drivers/net/tap.c", [2]),
                 coverage.FunctionCoverage("tun_init", "drivers/net/tun.c", [3])]
    console_text = "\n".join([
        "[    5.1] PATCHBENCH-COVERAGE-TRACED", "tun_ring_consume.isra.0", "tap_ring_consume",
        "PATCHBENCH-COVERAGE-PROFILE", "  Function        Hit    Time     Avg     s^2",
        "  --------        ---    ----     ---     ---", "  tun_ring_consume.isra.0     1204    310.5 us",
        "PATCHBENCH-COVERAGE-END"])
    coverage.read(console_text, functions)
    assert [f.describe() for f in functions] == [
        "tun_ring_consume: ran 1,204 times", "tap_ring_consume: did not run",
        "tun_init: not traceable (inlined, notrace or init code)"]
    text = jobs_report.to_text([JobResult("boot", 3, "a" * 40, "pass", 1.0, coverage=functions)])
    assert "coverage: 1 of 3 changed functions ran" in text
    assert "patch 2: tap_ring_consume: did not run" in text
    per_patch = coverage.coverage_json(functions)["per_patch"]
    assert [(p["patch"], p["summary"]) for p in per_patch] == [
        (1, "1 of 1 changed function ran"), (2, "0 of 1 changed function ran"), (3, "1 of 2 changed functions ran")]


def test_coverage_of_a_guest_that_stopped_early_is_unknown_not_zero():
    functions = [coverage.FunctionCoverage("tun_ring_consume", "drivers/net/tun.c", [1])]
    coverage.read("PATCHBENCH-COVERAGE-TRACED\ntun_ring_consume\nPATCHBENCH-COVERAGE-PROFILE\n", functions)
    assert functions[0].status == "unknown" and functions[0].calls is None
    assert coverage.summary(functions).startswith("not collected")


def test_exercises_follow_what_the_series_touches():
    assert [e.name for e in exercise.chosen(["drivers/net/tun.c"])] == ["tun-ring"]
    assert [e.name for e in exercise.chosen(["drivers/net/veth.c", "drivers/virtio/virtio_ring.c"])] == [
        "veth-flood", "virtio-net-flood"]
    assert exercise.chosen(["drivers/net/dummy.c", "Documentation/networking/tuntap.rst"]) == []
    for e in exercise.table():   # every program the table names is ours and present
        assert e.program is None or (exercise.GUEST / e.program).is_file()


def test_the_guest_carries_the_chosen_exercise_programs(tmp_path):
    require_tool("busybox")
    require_tool("gcc")
    require_tool("cpio")
    files = exercise.guest_files(exercise.chosen(["drivers/net/tun.c", "drivers/vhost/net.c"]), tmp_path)
    archive = initramfs.build(tmp_path, files)
    listing = subprocess.run(["cpio", "-it"], input=gzip.decompress(archive.read_bytes()),
                             capture_output=True).stdout.decode().split()
    assert {"bin/tun_ring", "bin/vhost_net", exercise.EXERCISES_FILE} <= set(listing)


def test_a_stall_is_a_splat_with_its_own_fingerprint():
    output = ("PATCHBENCH-EXERCISE: tun-ring: tun_ring pbring0\n"
              "PATCHBENCH-STALL: tun pbring0 tx queue: no packet for 2 s while the writer kept sending (500 read)\n"
              "PATCHBENCH-SMOKE: FAIL exercise tun-ring\n")
    result = JobResult("boot", 2, "c0ffee", "pass", 0.0)
    judge(result, output, timed_out=False, limit=30)
    assert result.status == "fail" and result.fingerprint == "STALL:tun|tx-queue"
    assert result.reason.startswith("PATCHBENCH-STALL: tun pbring0 tx queue: no packet")


def test_build_rules_changes_name_their_directories():
    assert directories_for(("drivers/net/Makefile", "net/core/Kbuild", "Makefile", "tools/net/Makefile",
                            "drivers/net/tun.c")) == ["drivers/net/", "net/core/"]


def test_boot_each_builds_and_boots_every_patch_in_order(tmp_path):
    patches = [AppliedPatch(1, "c1", "b0", ["drivers/net/tun.c"]), AppliedPatch(2, "c2", "c1", ["drivers/net/tap.c"])]
    applied = ApplyResult(tmp_path, "b0", "", patches, None, "c2")
    target = Target(tmp_path, "b0")
    jobs = plan(applied, target, objects=True, boot=True, boot_each=True)
    assert [(type(j).__name__, j.commit) for j in jobs] == [
        ("ObjectsJob", "c1"), ("ObjectsJob", "c2"), ("KernelJob", "c1"), ("BootJob", "c1"),
        ("KernelJob", "c2"), ("BootJob", "c2")]
    assert all(j.series_files == ("drivers/net/tap.c", "drivers/net/tun.c") for j in jobs if isinstance(j, ObjectsJob))
    boots = [j for j in jobs if isinstance(j, BootJob)]
    assert boots[1].patches == ((1, "b0", "c1"), (2, "c1", "c2"))
    head_only = plan(applied, target, objects=False, boot=True)
    assert [(type(j).__name__, j.commit) for j in head_only] == [("KernelJob", "c2"), ("BootJob", "c2")]
    assert isinstance(head_only[0], KernelJob)
    results = [JobResult("boot", 1, "c1" * 20, "pass", 1.0),
               JobResult("boot", 2, "c2" * 20, "fail", 1.0, fingerprint="STALL:tun|tx-queue", reason="stall")]
    assert jobs_report.first_failing_boot(results)["patch"] == 2
    assert "first failing boot: patch 2 c2c2c2c2c2c2: STALL:tun|tx-queue" in jobs_report.to_text(results)
