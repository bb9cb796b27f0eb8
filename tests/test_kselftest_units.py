"""Kselftest parts that need no kernel build: selections, the TAP of run_kselftest.sh, the verdict, the
files a guest needs to run a test program."""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path

import pytest

from patchbench.cli import main
from patchbench.dispatch import initramfs
from patchbench.dispatch.boot import judge
from patchbench.dispatch.jobs import JobResult
from patchbench.dispatch.kselftest import GuestFile, KselftestResult, Selection, guest_files, parse_tap
from patchbench.errors import BadInput
from tests.conftest import require_tool

CONSOLE = Path(__file__).resolve().parents[1] / "fixtures" / "dispatch" / "console" / "kselftest-tap.txt"
NET = (Selection("net"),)


def test_each_top_level_tap_line_is_one_result_and_nested_lines_are_not():
    assert parse_tap(CONSOLE.read_text()) == [
        KselftestResult("net", "reuseport_bpf", "pass"),
        KselftestResult("net", "tun", "fail"),            # a kernel line between its lines does not hide it
        KselftestResult("net", "reuseport_bpf_numa", "skip"),
        KselftestResult("net", "tls", "fail"),            # a timeout is a failure, not a skip
    ]


def test_plain_tap_names_keep_the_whole_name_as_the_test():
    text = "PATCHBENCH-KSELFTEST-BEGIN\nok 1 loopback works\nnot ok 2 odd one # skip no device\n" \
           "PATCHBENCH-KSELFTEST-END\n"
    assert parse_tap(text) == [KselftestResult("", "loopback works", "pass"),
                               KselftestResult("", "odd one", "skip")]


def test_a_failing_kselftest_fails_the_job_with_its_fingerprint():
    result = JobResult("boot", None, "c0ffee", "pass", 0.0)
    judge(result, CONSOLE.read_text(), timed_out=False, limit=60, kselftests=NET)
    assert result.status == "fail"
    assert result.fingerprint == "KSELFTEST:net:tun"
    assert result.reason == "kselftest net:tun failed (and 1 more)"
    assert result.to_json()["kselftests"][2] == {"target": "net", "test": "reuseport_bpf_numa", "status": "skip"}


def test_passing_and_skipped_kselftests_pass_the_job():
    text = CONSOLE.read_text().replace("not ok 2 selftests: net: tun # exit=1", "ok 2 selftests: net: tun") \
        .replace("not ok 4 selftests: net: tls # TIMEOUT 45 seconds", "ok 4 selftests: net: tls")
    result = JobResult("boot", None, "c0ffee", "pass", 0.0)
    judge(result, text, timed_out=False, limit=60, kselftests=NET)
    assert (result.status, result.fingerprint) == ("pass", None)
    assert [k.status for k in result.kselftests] == ["pass", "pass", "skip", "pass"]


def test_a_guest_that_stops_inside_the_kselftests_fails_and_a_missing_test_is_an_error():
    started = "PATCHBENCH-SMOKE: PASS\nPATCHBENCH-KSELFTEST-BEGIN\nTAP version 13\n1..1\n# selftests: net: tun\n"
    stopped = JobResult("boot", None, "c0ffee", "pass", 0.0)
    judge(stopped, started, timed_out=False, limit=60, kselftests=(Selection("net", "tun"),))
    assert (stopped.status, stopped.reason) == ("fail", "the guest stopped before the kselftests finished")
    missing = JobResult("boot", None, "c0ffee", "pass", 0.0)
    judge(missing, started + "PATCHBENCH-KSELFTEST-END\n", timed_out=False, limit=60,
          kselftests=(Selection("net", "tun"),))
    assert (missing.status, missing.reason) == ("error", "no kselftest result for net:tun")


def test_without_kselftests_the_smoke_status_alone_decides():
    result = JobResult("boot", None, "c0ffee", "pass", 0.0)
    judge(result, "PATCHBENCH-SMOKE: PASS\n", timed_out=False, limit=60)
    assert result.status == "pass" and result.kselftests == []


@pytest.mark.parametrize("spec, selection, runner_args", [
    ("net", Selection("net"), ["-c", "net"]),
    ("net/af_unix:unix_connect", Selection("net/af_unix", "unix_connect"), ["-t", "net/af_unix:unix_connect"]),
])
def test_a_selection_is_a_target_or_one_test_of_it(spec, selection, runner_args):
    assert Selection.parse(spec) == selection
    assert selection.runner_args() == runner_args and str(selection) == spec


@pytest.mark.parametrize("spec", ["", ":tun", "net:", "../net", "net/../x", "net:a/b", "net tun", "net:a:b"])
def test_malformed_selections_are_bad_input(spec):
    with pytest.raises(BadInput, match="expected TARGET or TARGET:TEST"):
        Selection.parse(spec)


@pytest.mark.parametrize("sandboxed", [False, True])
def test_a_dynamically_linked_test_program_brings_its_libraries_and_loader(tmp_path, sandboxed):
    require_tool("gcc")
    if sandboxed:
        require_tool("bwrap")
    install = tmp_path / "install"
    (install / "demo").mkdir(parents=True)
    src = tmp_path / "hello.c"
    src.write_text("#include <math.h>\n#include <stdio.h>\n"
                   "int main(int argc, char **argv) { printf(\"%f\\n\", cos(argc)); return 0; }\n")
    subprocess.run(["gcc", "-o", str(install / "demo" / "hello"), str(src), "-lm"], check=True)
    (install / "demo" / "script.sh").write_text("#!/bin/bash\necho hi\n")
    (install / "demo" / "script.sh").chmod(0o755)
    files = {f.name: f for f in guest_files(install, (Selection("demo", "hello"),), sandboxed)}
    assert files["kselftest/patchbench-args"].data == b"-t demo:hello\n"
    assert files["kselftest/demo/hello"].mode == 0o100755
    libm = [name for name in files if Path(name).name == "libm.so.6"]  # the program's own, not timeout's
    libc = [name for name in files if Path(name).name == "libc.so.6"]
    loader = [name for name in files if Path(name).name.startswith("ld-linux")]
    assert libm and libc and loader, sorted(files)
    assert files[libc[0]].data[:4] == b"\x7fELF"  # the library itself, not the host's symlink
    if shutil.which("bash"):
        assert files["bin/bash"].data[:4] == b"\x7fELF"  # the script's interpreter, where its #! looks


def test_the_guest_initramfs_carries_the_kselftest_files_under_their_directories(tmp_path):
    for tool in ("busybox", "gcc", "cpio"):
        require_tool(tool)
    extra = [GuestFile("kselftest/net/af_unix/unix_connect", 0o100755, b"\x7fELF..."),
             GuestFile("lib/x86_64-linux-gnu/libc.so.6", 0o100755, b"\x7fELF.")]
    archive = initramfs.build(tmp_path / "cache", extra)
    assert archive != initramfs.build(tmp_path / "cache")  # other files, another archive
    unpacked = tmp_path / "root"
    unpacked.mkdir()
    subprocess.run(["cpio", "-id", "--quiet"], input=gzip.decompress(archive.read_bytes()), cwd=unpacked,
                   check=True)
    assert (unpacked / "kselftest/net/af_unix/unix_connect").read_bytes() == b"\x7fELF..."
    assert (unpacked / "kselftest/net/af_unix/unix_connect").stat().st_mode & 0o111
    assert (unpacked / "lib/x86_64-linux-gnu/libc.so.6").is_file() and (unpacked / "init").is_file()


def test_a_malformed_kselftest_or_one_without_boot_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["boot", "a..b", "--tree", str(tmp_path), "--kselftest", "net tun"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("patchbench: error: --kselftest 'net tun': expected TARGET or TARGET:TEST") and "\n" not in err
    assert main(["run", str(tmp_path), "--tree", str(tmp_path), "--kselftest", "net"]) == 2
    assert capsys.readouterr().err.strip() == "patchbench: error: --kselftest runs in the boot guest: add --boot"
