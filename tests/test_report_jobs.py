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
