"""Job results as people read them: a failed boot says which kselftest failed and why."""

from patchbench.dispatch.jobs import JobResult
from patchbench.dispatch.kselftest import KselftestResult
from patchbench.report import jobs


def test_text_lists_each_kselftest_and_the_failure_fingerprint():
    result = JobResult(kind="boot", patch=None, commit="a" * 40, status="fail", seconds=14.8,
                       reason="kselftest net/af_unix:diag_uid failed", log="/tmp/console.log",
                       fingerprint="KSELFTEST:net/af_unix:diag_uid",
                       kselftests=[KselftestResult("net/af_unix", "unix_connect", "pass"),
                                   KselftestResult("net/af_unix", "diag_uid", "fail")])
    text = jobs.to_text([result])
    assert "boot head aaaaaaaaaaaa: fail: kselftest net/af_unix:diag_uid failed (14.8 s)" in text
    assert "    kselftest net/af_unix:unix_connect: pass" in text
    assert "    kselftest net/af_unix:diag_uid: fail" in text
    assert "    fingerprint KSELFTEST:net/af_unix:diag_uid" in text
    assert jobs.exit_code([result]) == 1


def test_text_keeps_to_100_columns_and_keeps_paths_whole():
    from patchbench.dispatch.warnings import Diagnostic

    long = "a very long compiler message about an implicit conversion that changes the value " * 2
    log = "/home/someone/.cache/patchbench/builds/" + "x" * 90 + "/build.log"
    result = JobResult(kind="build", patch=2, commit="b" * 40, status="fail", seconds=3.0, scope="objects",
                       reason="new warnings", log=log,
                       new_warnings=[Diagnostic("drivers/net/tun.c", 2190, "tun_ring_consume", "-Wconversion",
                                                "warning", long)])
    lines = jobs.to_text([result]).splitlines()
    assert all(len(line) <= 100 for line in lines if log not in line)
    assert any(line.strip() == log for line in lines)
    assert " ".join(line.strip() for line in lines[1:-1]).count("implicit conversion") == 2
