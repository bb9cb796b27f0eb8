"""Kernels built and booted by remote workers: the bot's every stage through the farm, and a worker
killed in the middle of a boot.

Two `patchbench worker`s under bubblewrap as in tests/test_farm_remote.py: homes of their own, the
host's /tmp and ~/.cache hidden, the 6.1 tree reachable only as the file URL of a bare copy, the
series' commits only through the tasks. Their homes and the bare copy are kept in the tests' cache,
as a farm machine keeps its cache: a worker builds a kernel from nothing in 20 minutes and more on a
small machine, so only a machine's first run pays that; later runs find the workers' build directories
warm. The bot and `boot` on this machine use the cached 6.1 tree itself, whose build directory
tests/test_boot_series.py keeps warm. The series are tests/test_boot_series.py's tun series: its wake
done right, and done outside an RCU read-side section (a "suspicious RCU usage" splat at boot).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchbench.dispatch.farm import make_app
from tests.conftest import require_tool
from tests.support import kernel
from tests.support.bot_queue import PROJECT, mails
from tests.support.farm import Workers, kept_served_copy, redis_server, seed_index, started_on
from tests.support.patchwork_server import TOKEN, PatchworkServer
from tests.support.ring_series import commit_series, tun_boot_series
from tests.support.smtp import SmtpSink
from tests.test_bot import bot_argv, load, posted

pytestmark = [pytest.mark.slow, pytest.mark.kernel]
ROOT = Path(__file__).resolve().parents[1]
WORKERS = ("w1@remote", "w2@remote")
QEMU = "qemu-system-x86_64"


@pytest.fixture(scope="module")
def farm(kernel_tree) -> tuple[Path, Path]:
    """(the bare copy the workers fetch from, where the workers' homes are kept)."""
    for tool in ("redis-server", "bwrap", "make", "gcc", "ccache", "flex", "bison", "bc", QEMU, "busybox"):
        require_tool(tool)
    return kept_served_copy(kernel_tree), kernel.CACHE / f"farm-workers-{kernel_tree.name}"


def start_workers(broker: str, logs: Path, farm: tuple[Path, Path], visibility_timeout: float) -> Workers:
    served, homes = farm
    workers = Workers(broker, logs, visibility_timeout=visibility_timeout, homes=homes)
    for name in WORKERS:
        seed_index(workers.home(name))
        workers.start(name, alone=(served,))
    return workers


def booting(workers: Workers, submitter: subprocess.Popen, log: Path, seen: set[int]) -> str:
    """The worker whose QEMU started first after those in `seen` (which it joins), as soon as there is one."""
    deadline = time.monotonic() + 3600   # a machine's first run builds the kernels from nothing
    while time.monotonic() < deadline and submitter.poll() is None:
        for name in WORKERS:
            new = set(workers.running(name, QEMU)) - seen
            if new:
                seen |= new
                return name
        time.sleep(0.5)
    raise AssertionError(f"no worker started a boot: {log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def bot_setup(kernel_tree, tmp_path_factory) -> dict:
    """The two tun series mailed for net-next, and a bot configured to check, build and boot."""
    base = kernel.base_commit(kernel_tree)
    root = tmp_path_factory.mktemp("farm-bot")
    queue = {name: (mails(kernel_tree, base, tun_boot_series(wake), root / name, title=title), None)
             for name, wake, title in (("clean", "rcu", "tun: stop the queue when full, wake it on consume"),
                                       ("bare", "bare", "tun: stop the queue when full, wake it on consume (bare)"))}
    (root / "token").write_text(TOKEN + "\n")
    config = root / "bot.toml"
    config.write_text(f'[projects.{PROJECT}]\nstages = ["check", "build", "boot"]\n'
                      f'mail_to = ["{PROJECT}@example.org"]\n[projects.{PROJECT}.trees]\nnet-next = "{base}"\n')
    return {"repo": kernel_tree, "root": root, "queue": queue, "config": config}


def test_the_bot_builds_and_boots_on_remote_workers_what_it_does_alone(bot_setup, farm, patchwork_spec, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def bot(pw: PatchworkServer, smtp: SmtpSink, state: str, *extra: str) -> list[str]:
        return bot_argv(pw, bot_setup, tmp_path / state, "--once", "--smtp", f"127.0.0.1:{smtp.port}", *extra)

    def sent(smtp: SmtpSink) -> list[tuple[str, str]]:
        return sorted((m["In-Reply-To"], m["Message-Id"]) for m in smtp.messages)

    served, _ = farm
    with redis_server(tmp_path) as broker, PatchworkServer() as pw, SmtpSink() as smtp:
        workers = start_workers(broker, tmp_path, farm, visibility_timeout=4200)
        try:
            series = load(pw, bot_setup["queue"])
            argv = bot(pw, smtp, "farm", "--runner", "celery", "--broker", broker, "--tree-url", served.as_uri())
            # Killed while a worker boots the second series (the first one is recorded, nothing is posted
            # yet), the bot is started again: it runs that series again and posts everything once.
            with open(tmp_path / "killed-bot.log", "w") as log:
                killed = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            seen: set[int] = set()
            booting(workers, killed, tmp_path / "killed-bot.log", seen)
            booting(workers, killed, tmp_path / "killed-bot.log", seen)
            killed.kill()
            killed.wait()
            done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
            assert done.returncode == 0, done.stderr
            farm_checks, farm_mails = sorted(posted(pw)), sent(smtp)
            replies = {m["In-Reply-To"]: m for m in smtp.messages}
            assert pw.violations == []
        finally:
            workers.stop()
    # As a maintainer reads it: every patch has its apply, check, build and boot check, once; the
    # series whose wake dereferences outside a read-side section fails its boot, naming the splat and
    # the helper, and its cover letter gets one reply with the console from the splat on; the clean
    # series' cover gets none. (Patch 2 of both, the stop without its wake yet, has its own static
    # finding, and its own reply.)
    assert len(farm_checks) == len(set(farm_checks)) == 4 * 6
    by_patch = {(patch, context): (state, text) for patch, context, state, text in farm_checks}
    for name in ("clean", "bare"):
        for patch in series[name]["patches"]:
            assert by_patch[patch["id"], "patchbench-build"] == ("success", "build pass; no new warnings")
            state, text = by_patch[patch["id"], "patchbench-boot"]
            if name == "clean":
                assert (state, text) == ("success", "boot pass"), text
            else:
                assert state == "fail" and "suspicious RCU usage" in text and "RCU:tun_ring_consume|" in text, text
    assert len(replies) == len(farm_mails)   # one mail per message answered
    assert series["clean"]["cover_letter"]["msgid"] not in replies
    boot_reply = replies[series["bare"]["cover_letter"]["msgid"]].get_content()
    assert "[boot] boot fail:" in boot_reply and "suspicious RCU usage" in boot_reply and "Console:" in boot_reply

    # The bot alone on this machine posts the same checks and sends the same mails.
    with PatchworkServer() as pw, SmtpSink() as smtp:
        load(pw, bot_setup["queue"])
        alone = subprocess.run(bot(pw, smtp, "alone"), cwd=ROOT, env=env, capture_output=True, text=True,
                               timeout=3600)
        assert alone.returncode == 0, alone.stderr
        assert (sorted(posted(pw)), sent(smtp)) == (farm_checks, farm_mails), alone.stderr
        assert pw.violations == []
    # Which worker built and booted is the operator's to know: on the pages, not in the checks.
    page = (tmp_path / "farm" / "pages" / f"series/{series['bare']['id']}/index.html").read_text()
    assert "boot ran on farm worker <code>w" in page and "suspicious RCU usage" in page


def test_a_remote_worker_killed_mid_boot_loses_nothing(kernel_tree, farm, tmp_path):
    """`patchbench boot` of the RCU-buggy series on the farm; the worker that boots it is killed while
    its QEMU runs (with the QEMU: the machine went down). The job runs again on the other worker, once
    the visibility timeout has passed: the report is the local one and each result is stored once."""
    base = kernel.base_commit(kernel_tree)
    head = commit_series(kernel_tree, base, tun_boot_series("bare"))
    served, _ = farm

    def boot(results: str, *extra: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "patchbench", "boot", f"{base}..{head}", "--tree",
                                 str(kernel_tree), "--format", "json", "--results", str(tmp_path / results), *extra],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=open(tmp_path / f"{results}.log", "w"),
                                text=True)

    def jobs(report: str) -> dict[str, dict]:
        """The kernel build's status and the boot job, apart from where and how long."""
        kernel_job, boot_job = json.loads(report)["jobs"]
        boot_job = {k: v for k, v in boot_job.items() if k not in ("seconds", "console", "worker")}
        boot_job["coverage"] = [{k: v for k, v in f.items() if k != "calls"}   # a count differs boot to boot
                                for f in boot_job["coverage"]["functions"]]
        return {"kernel": kernel_job["status"], "boot": boot_job}

    local = boot("local.sqlite")
    local_out, _ = local.communicate(timeout=3600)
    assert local.returncode == 1, (tmp_path / "local.sqlite.log").read_text()
    with redis_server(tmp_path) as broker:
        # Longer than the job on a warm worker (an incremental build and a boot under TCG)
        workers = start_workers(broker, tmp_path, farm, visibility_timeout=300)
        try:
            farm_boot = boot("farm.sqlite", "--runner", "celery", "--broker", broker, "--tree-url", served.as_uri())
            victim = booting(workers, farm_boot, tmp_path / "farm.sqlite.log", set())
            task = started_on(broker, victim, farm_boot)
            workers.kill(victim)
            farm_out, _ = farm_boot.communicate(timeout=3600)
            assert farm_boot.returncode == 1, (tmp_path / "farm.sqlite.log").read_text()
            (other,) = set(WORKERS) - {victim}
            assert [r["worker"] for r in make_app(broker).AsyncResult(task).get(timeout=10)] == [other, other]
        finally:
            workers.stop()
    assert jobs(farm_out) == jobs(local_out)
    assert jobs(farm_out)["boot"]["fingerprint"].startswith("RCU:tun_ring_consume|")
    with sqlite3.connect(tmp_path / "farm.sqlite") as db:
        stored = db.execute("SELECT kind, worker, count(*) FROM results GROUP BY job_id").fetchall()
    assert sorted(stored) == [("boot", other, 1), ("build", other, 1)]
