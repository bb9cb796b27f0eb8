"""Dispatch parts that need no kernel build: warning identities, console splats, the guest, the sandbox,
the results store and its command."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from patchbench.cli import main
from patchbench.dispatch import commits, console, initramfs, sandbox, warnings, workspace
from patchbench.dispatch.boot import judge
from patchbench.dispatch.build import objects_for
from patchbench.dispatch.kbuild import Kbuild
from patchbench.dispatch.workspace import Slot, resolve
from patchbench.errors import BadInput
from patchbench.dispatch.jobs import JobResult
from patchbench.dispatch.kconfig import KernelConfig, check_dotconfig
from patchbench.dispatch.store import ResultStore
from tests.conftest import require_tool
from tests.support.farm import descendants

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "dispatch"
SRC = "/cache/slot-0/src"


def test_a_new_warning_is_not_hidden_by_a_fixed_one():
    before = warnings.parse((FIXTURES / "gcc-before.txt").read_text(), SRC)
    after = warnings.parse((FIXTURES / "gcc-after.txt").read_text(), SRC)
    assert len(before) == len(after) == 2  # a count comparison would see nothing
    (new,) = warnings.new_since(before, after)
    assert (new.file, new.function, new.flag, new.line) == ("drivers/net/tun.c", "tun_init", "-Wunused-variable", 3725)
    assert new.message == "unused variable 'init_count'"
    (fixed,) = warnings.new_since(after, before)
    assert fixed.function == "tun_chr_open"
    # The kernel-doc warning moved from line 1200 to 1207: the same warning, not a new one.


def test_a_second_copy_of_a_warning_is_new():
    before = warnings.parse((FIXTURES / "gcc-after.txt").read_text(), SRC)
    doubled = (FIXTURES / "gcc-after.txt").read_text().replace("3725:13", "3726:13", 1)
    after = before + warnings.parse(doubled, SRC)[:1]
    assert [d.message for d in warnings.new_since(before, after)] == ["unused variable 'init_count'"]


def test_warn_splat_is_fingerprinted_by_its_function_and_callers():
    text = (FIXTURES / "console" / "warn-tun-init.txt").read_text()
    (splat,) = console.splats(text)
    assert splat.fingerprint == "WARNING:tun_init|do_one_initcall|kernel_init_freeable"


def test_fingerprint_ignores_addresses_pids_and_times():
    text = (FIXTURES / "console" / "warn-tun-init.txt").read_text()
    other = (text.replace("PID: 1 ", "PID: 7 ").replace("tun_init+0x1f/0x9a", "tun_init+0x2b/0xa0")
             .replace("[    1.2", "[    9.8").replace("tun.c:3728", "tun.c:3731"))
    assert [s.fingerprint for s in console.splats(other)] == [s.fingerprint for s in console.splats(text)]


@pytest.mark.parametrize("name, fingerprint", [
    ("hung-task.txt", "HUNG_TASK:tun_init|do_one_initcall|kernel_init_freeable"),
    ("suspicious-rcu.txt", "RCU:tun_net_xmit|dev_hard_start_xmit|__dev_queue_xmit"),
])
def test_other_splats(name, fingerprint):
    (splat,) = console.splats((FIXTURES / "console" / name).read_text())
    assert splat.fingerprint == fingerprint


def test_without_a_reliable_unwinder_the_guessed_frames_are_used():
    (splat,) = console.splats((FIXTURES / "console" / "warn-guess-unwinder.txt").read_text())
    assert splat.fingerprint == "WARNING:tun_init|do_one_initcall|kernel_init_freeable"


def test_boot_with_a_splat_fails_even_when_the_smoke_test_passed():
    result = JobResult("boot", 1, "c0ffee", "pass", 0.0)
    judge(result, (FIXTURES / "console" / "suspicious-rcu.txt").read_text(), timed_out=False, limit=30)
    assert result.status == "fail"
    assert result.fingerprint.startswith("RCU:tun_net_xmit")


def test_silent_hang_is_said_so():
    result = JobResult("boot", None, "c0ffee", "pass", 0.0)
    judge(result, "Linux version 6.1\nRun /init as init process\n", timed_out=True, limit=180)
    assert result.status == "fail"
    assert "hung, killed after 180 s" in result.reason
    assert result.fingerprint == "HANG:Run /init as init process"


def test_clean_boot_passes_and_a_failed_smoke_step_fails():
    ok = JobResult("boot", None, "c0ffee", "pass", 0.0)
    judge(ok, "Run /init as init process\nPATCHBENCH-SMOKE: PASS\n", timed_out=False, limit=5)
    assert ok.status == "pass" and ok.fingerprint is None
    bad = JobResult("boot", None, "c0ffee", "pass", 0.0)
    judge(bad, "PATCHBENCH-SMOKE: FAIL veth: no reply across the pair\n", timed_out=False, limit=5)
    assert bad.status == "fail" and bad.reason == "smoke test: veth: no reply across the pair"


def test_config_check_names_dropped_options(tmp_path):
    fragment = tmp_path / "extra.config"
    fragment.write_text("CONFIG_TUN=y\nCONFIG_NO_SUCH_THING=y\n# CONFIG_VETH is not set\n")
    dotconfig = tmp_path / ".config"
    dotconfig.write_text("CONFIG_TUN=y\n# CONFIG_VETH is not set\nCONFIG_64BIT=y\n")
    config = KernelConfig.netdev([fragment])
    missing = check_dotconfig(dotconfig, config.requested()).missing
    assert missing["CONFIG_NO_SUCH_THING"] == "y" and "CONFIG_VETH" not in missing and "CONFIG_TUN" not in missing


def test_guest_initramfs_holds_static_busybox_helper_and_init(tmp_path):
    require_tool("busybox")
    require_tool("gcc")
    require_tool("cpio")
    archive = initramfs.build(tmp_path)
    listing = subprocess.run(["cpio", "-itv"], input=gzip.decompress(archive.read_bytes()),
                             capture_output=True).stdout.decode()
    for name in ("init", "bin/busybox", "bin/tun_echo", "dev/console"):
        assert name in listing
    assert initramfs.build(tmp_path) == archive  # cached


def test_sandbox_has_no_network_and_writes_only_where_allowed(tmp_path):
    require_tool("bwrap")
    allowed = tmp_path / "obj"
    allowed.mkdir()
    host_dir = Path(tempfile.mkdtemp(prefix="sandbox-probe-", dir=Path.home()))  # not on the sandbox's own /tmp
    try:
        script = (f"touch {allowed}/ok; touch {host_dir}/escaped 2>/dev/null && echo WROTE-OUTSIDE;"
                  f" touch {tmp_path}/private;"
                  " cat /proc/net/dev | tail -n +3 | cut -d: -f1")
        done = sandbox.run(["sh", "-c", script], timeout=30, log=tmp_path / "log", sandbox=[allowed])
        assert done.returncode == 0, done.output
        assert (allowed / "ok").exists()
        assert "WROTE-OUTSIDE" not in done.output and not (host_dir / "escaped").exists()
        assert not (tmp_path / "private").exists()  # the sandbox's /tmp is its own
        assert done.output.split() == ["lo"]  # a fresh network namespace: loopback only
    finally:
        shutil.rmtree(host_dir)


def test_timeout_kills_the_whole_process_group_and_says_so(tmp_path):
    done = sandbox.run(["sh", "-c", "sleep 60 & sleep 60"], timeout=1, log=tmp_path / "log")
    assert done.timed_out and done.seconds < 10
    assert "killed after 1 s timeout" in (tmp_path / "log").read_text()


@pytest.mark.parametrize("sandboxed", [False, True], ids=["alone", "bwrap"])
def test_a_command_dies_with_the_process_that_ran_it(tmp_path, sandboxed):
    """A farm worker SIGKILLed mid-job: a command run alone (QEMU) or under bubblewrap with processes
    of its own (make and its compilers) goes with it, rather than running on to the end of its guest
    or build."""
    if sandboxed:
        require_tool("bwrap")
    command = ["sh", "-c", "sleep 600 & wait"] if sandboxed else ["sleep", "600"]
    ran_by = ("import sys; from pathlib import Path; from patchbench.dispatch import sandbox; "
              f"sandbox.run(sys.argv[2:], timeout=900, log=Path(sys.argv[1]), sandbox={[] if sandboxed else None})")
    helper = subprocess.Popen([sys.executable, "-c", ran_by, str(tmp_path / "log"), *command],
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 30
    while not (sleeps := [pid for pid, comm in descendants(helper.pid) if comm == "sleep"]):
        assert helper.poll() is None and time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    helper.kill()
    helper.wait()
    deadline = time.monotonic() + 5
    while alive := [pid for pid in sleeps if _running(pid)]:
        if time.monotonic() > deadline:
            for pid in alive:
                os.kill(pid, 9)
            raise AssertionError(f"sleep {alive} outlived the process that ran it")
        time.sleep(0.05)


def _running(pid: int) -> bool:
    """Not gone and not a zombie (one whose new parent has not reaped it yet is dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def test_results_are_stored_and_shown(tmp_path, capsys):
    db = tmp_path / "results.sqlite"
    store = ResultStore(db)
    result = JobResult("boot", 2, "abcdef1234567890", "fail", 12.5, fingerprint="WARNING:tun_init|x",
                       reason="WARNING: CPU: 0 PID: 1 at drivers/net/tun.c:3728 tun_init+0x1f/0x9a")
    store.add("run-1", tmp_path, result)
    assert [r.data["commit"] for r in store.seen_before("WARNING:tun_init|x", "run-2")] == ["abcdef1234567890"]
    assert store.seen_before("WARNING:tun_init|x", "run-1") == []
    store.close()
    assert main(["results", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "abcdef123456" in out and "fail" in out and "WARNING:tun_init|x" in out
    assert main(["results", "--db", str(db), "--format", "json", "--status", "pass"]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize("leftover", [False, True], ids=["fresh", "cold-slot-left"])
def test_a_second_build_of_a_key_waits_for_its_warm_slot_and_makes_no_cold_one(tmp_path, leftover):
    """Two runs of the same base and config at once: the second waits for the first's build directory
    (warm: it recompiles only what changed) instead of configuring a cold one, even when an older
    version left a cold slot there, and makes none."""
    key_dir = tmp_path / "cache" / "builds" / "key"
    if leftover:
        (key_dir / "slot-1").mkdir(parents=True)
    holding, release, waiting = threading.Event(), threading.Event(), threading.Event()
    took: list[str] = []

    def build(name: str, hold: bool) -> None:
        with workspace.hold_slot(tmp_path, "key", tmp_path / "cache", on_wait=waiting.set) as slot:
            took.append(f"{name} {slot.root.name}")
            if hold:
                (slot.obj / ".config").write_text("# configured\n")
                holding.set()
                release.wait(30)
                took.append(f"{name} done")
    first = threading.Thread(target=build, args=("first", True))
    first.start()
    assert holding.wait(30)
    second = threading.Thread(target=build, args=("second", False))
    second.start()
    assert waiting.wait(30) and took == ["first slot-0"]
    release.set()
    first.join(30)
    second.join(30)
    assert took == ["first slot-0", "first done", "second slot-0"]
    assert sorted(p.name for p in key_dir.iterdir()) == (["slot-0", "slot-1"] if leftover else ["slot-0"])


def _repo_with_two_commits(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    def git(*args):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env={**os.environ, **env})
    git("init", "-q")
    (repo / "a.c").write_text("int a;\n")
    git("add", "a.c")
    git("commit", "-qm", "base")
    git("tag", "base")
    (repo / "a.c").write_text("int a = 1;\n")
    (repo / "b.h").write_text("#define B 1\n")
    git("add", "a.c", "b.h")
    git("commit", "-qm", "first")
    (repo / "b.h").write_text("#define B 2\n")
    git("commit", "-qam", "second")
    return repo


def test_a_commit_range_becomes_a_series_of_patches(tmp_path):
    repo = _repo_with_two_commits(tmp_path)
    assert commits.is_range(repo, "base..HEAD") and not commits.is_range(repo, "base..nosuchrev")
    applied = commits.applied_range(repo, "base..HEAD")
    assert [(p.index, p.subject, p.files) for p in applied.applied] == [(1, "first", ["a.c", "b.h"]),
                                                                        (2, "second", ["b.h"])]
    assert applied.applied[1].parent == applied.applied[0].commit and applied.head == applied.applied[1].commit
    with pytest.raises(BadInput):
        commits.applied_range(repo, "HEAD..HEAD")


def test_a_slot_whose_repository_was_made_again_gets_a_fresh_worktree(tmp_path):
    """A repository re-made at the same path (re-cloned, or rebuilt from a new source tarball) has
    forgotten the slot's worktree: the next build must not fail with 'not a git repository'."""
    (tmp_path / "one").mkdir()
    repo = _repo_with_two_commits(tmp_path / "one")
    slot = Slot(tmp_path / "slot", repo)
    slot.root.mkdir()
    slot.checkout("base")
    (slot.src / "stale.o").write_text("left behind")
    shutil.rmtree(repo)
    repo = _repo_with_two_commits(tmp_path / "one")   # the same path, a new repository
    slot.checkout("HEAD")
    assert subprocess.run(["git", "-C", str(slot.src), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip() == resolve(repo, "HEAD")
    assert not (slot.src / "stale.o").exists()


def test_touched_files_map_to_objects_and_headers_to_their_includers(tmp_path):
    slot = Slot(tmp_path / "slot", tmp_path)
    (slot.obj / "drivers/net").mkdir(parents=True)
    (slot.obj / "drivers/net/.tun.o.cmd").write_text(f"deps := \\\n  {slot.src}/include/linux/ptr_ring.h \\\n")
    (slot.obj / "drivers/net/.veth.o.cmd").write_text(f"deps := \\\n  {slot.src}/include/linux/skbuff.h \\\n")
    kbuild = Kbuild(slot)
    files = ("drivers/net/tap.c", "include/linux/ptr_ring.h", "Documentation/networking/tuntap.rst",
             "arch/x86/entry/entry_64.S", "tools/testing/selftests/net/tun.c")
    assert objects_for(files, kbuild) == ["arch/x86/entry/entry_64.o", "drivers/net/tap.o", "drivers/net/tun.o"]


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["build", "a..b", "--tree", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"patchbench: error: not a git repository: {tmp_path}"
    repo = _repo_with_two_commits(tmp_path)
    assert main(["boot", "HEAD..HEAD", "--tree", str(repo)]) == 2
    assert "holds no commit" in capsys.readouterr().err
    assert main(["build", "base..HEAD", "--tree", str(repo), "--config", str(tmp_path / "missing.config")]) == 2
    assert "config fragment not found" in capsys.readouterr().err
