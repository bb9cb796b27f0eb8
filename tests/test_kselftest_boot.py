"""A real kselftest, built from the series' own 6.1 worktree, run in the booted guest after the smoke test.

Shares the cached netdev build directory and kernel of tests/test_build_boot.py (same tree, base and
config), so only the selftest itself is compiled here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import require_tool
from tests.support import kernel
from tests.support.planted import plant
from tests.test_build_boot import patchbench

pytestmark = [pytest.mark.slow, pytest.mark.kernel]


@pytest.fixture(scope="module")
def clean_head(kernel_tree):
    for tool in ("make", "gcc", "ccache", "bwrap", "qemu-system-x86_64", "rsync", "ldd"):
        require_tool(tool)
    base = kernel.base_commit(kernel_tree)
    head, _ = plant(kernel_tree, "warning-series", base)  # nothing a boot would notice
    return base, head


def boot_with_kselftests(kernel_tree, clean_head, tmp_path, *selections) -> tuple[int, dict, str]:
    """`patchbench boot` of the clean head with `--kselftest` for each selection: (exit code, boot job, stderr)."""
    base, head = clean_head
    options = [arg for selection in selections for arg in ("--kselftest", selection)]
    code, report, stderr = patchbench("boot", f"{base}..{head}", "--tree", str(kernel_tree),
                                      "--results", str(tmp_path / "results.sqlite"), *options)
    return code, report["jobs"][-1], stderr


def test_a_named_kselftest_runs_in_the_guest_and_its_tap_is_parsed(kernel_tree, clean_head, tmp_path):
    code, boot_job, _ = boot_with_kselftests(kernel_tree, clean_head, tmp_path, "net/af_unix:unix_connect")
    console = Path(boot_job["console"]).read_text()
    assert boot_job["status"] == "pass", f"{boot_job['reason']}\n{console[-3000:]}"
    assert code == 0
    assert boot_job["kselftests"] == [{"target": "net/af_unix", "test": "unix_connect", "status": "pass"}]
    assert "ok 1 selftests: net/af_unix: unix_connect" in console


def test_a_failing_kselftest_fails_the_boot_with_its_fingerprint(kernel_tree, clean_head, tmp_path):
    # diag_uid needs CONFIG_UNIX_DIAG (its target's own `config` asks for it); the netdev config lacks it.
    code, boot_job, _ = boot_with_kselftests(kernel_tree, clean_head, tmp_path,
                                             "net/af_unix:diag_uid", "net/af_unix:unix_connect")
    assert code == 1 and boot_job["status"] == "fail", boot_job
    assert boot_job["fingerprint"] == "KSELFTEST:net/af_unix:diag_uid"
    assert boot_job["kselftests"] == [{"target": "net/af_unix", "test": "diag_uid", "status": "fail"},
                                      {"target": "net/af_unix", "test": "unix_connect", "status": "pass"}]


def test_a_target_the_tree_does_not_have_is_an_error_with_the_reason(kernel_tree, clean_head, tmp_path):
    code, boot_job, stderr = boot_with_kselftests(kernel_tree, clean_head, tmp_path, "net/no_such_target")
    assert code == 1 and "Traceback" not in stderr
    assert boot_job["status"] == "error"
    assert boot_job["reason"] == "no kselftest target net/no_such_target in tools/testing/selftests of this tree"


def test_a_target_that_cannot_build_here_is_an_error_with_the_compiler_message(kernel_tree, clean_head, tmp_path):
    if Path("/usr/include/alsa/asoundlib.h").exists():
        pytest.skip("the alsa target builds on this machine (libasound2-dev is installed)")
    code, boot_job, stderr = boot_with_kselftests(kernel_tree, clean_head, tmp_path, "alsa")
    assert code == 1 and "Traceback" not in stderr
    assert boot_job["status"] == "error"
    assert boot_job["reason"].startswith("kselftest alsa does not build here: mixer-test.c")
    assert "alsa/asoundlib.h: No such file or directory" in boot_job["reason"]
