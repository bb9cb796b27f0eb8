"""The Celery farm: a real redis-server and real `patchbench worker` processes on loopback.

Jobs are the static checks of real patches on the 6.1 tree (each analyses a real driver with a cold
facts cache, so it takes a moment), and a touched-object build. A worker is killed with SIGKILL in
the middle of a job; every job must still run, each result be stored once and equal the local
runner's result for the same job.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from patchbench.cli import main
from patchbench.dispatch.build import Context, kernel_image
from patchbench.dispatch.farm import CHECK_QUEUE, FarmRunner
from patchbench.dispatch.jobs import BootJob, Target
from patchbench.dispatch.progress import PlainProgress
from patchbench.dispatch.runner import check_jobs, execute
from patchbench.dispatch.store import ResultStore
from patchbench.errors import BadInput
from patchbench.tree import AppliedPatch, ApplyResult
from tests.conftest import require_tool
from tests.support import kernel
from tests.support.farm import RedisServer, Workers, free_port, redis_server
from tests.support.git_series import commit_files, git
from tests.support.ring_series import TUN_HELPER_UNLOCKED_PATH, commit_series, make_series, tun_patch

pytestmark = pytest.mark.kernel
ROOT = Path(__file__).resolve().parents[1]
# One small edit each in drivers big enough that a cold analysis takes a while.
TOUCHED = ["drivers/net/tap.c", "drivers/net/veth.c", "drivers/net/virtio_net.c", "drivers/net/macvlan.c",
           "drivers/net/bonding/bond_main.c", "drivers/net/vxlan/vxlan_core.c", "net/core/dev.c",
           "drivers/net/ethernet/intel/e1000/e1000_main.c"]


@pytest.fixture
def broker(tmp_path):
    require_tool("redis-server")
    with redis_server(tmp_path) as url:
        yield url


@pytest.fixture
def workers(broker, tmp_path):
    pool = Workers(broker, tmp_path)
    yield pool
    pool.stop()


@pytest.fixture(scope="module")
def series_commits(kernel_tree, tmp_path_factory):
    """A clone with a series of patches on 6.1: one unlocked-consume bug in tun.c and eight harmless
    edits in other drivers; its ApplyResult as apply would make it."""
    repo = tmp_path_factory.mktemp("farm") / "linux"
    git(repo.parent, "clone", "-q", "--shared", "--no-checkout", str(kernel_tree), str(repo))
    base = git(repo, "rev-parse", kernel.TAG)
    edits = [tun_patch(TUN_HELPER_UNLOCKED_PATH)]
    for path in TOUCHED:
        whole = git(repo, "show", f"{base}:{path}") + "\n"
        edits.append((path, f"{path.split('/')[-1]}: comment", [(whole, whole + "/* farm test */\n")]))
    tip = commit_series(repo, base, edits)
    shas = git(repo, "rev-list", "--reverse", f"{base}..{tip}").split()
    applied = [AppliedPatch(n, sha, parent, [edit[0]], edit[1])
               for n, (sha, parent, edit) in enumerate(zip(shas, [base, *shas], edits), 1)]
    return repo, base, ApplyResult(repo, base, "test", applied, None, tip)


@pytest.fixture
def hanging_boots(tmp_path, monkeypatch) -> tuple[list[BootJob], Path]:
    """Boot jobs of two commits of a small repository, and a worker's cache holding their "kernels"
    where its kernel builds would have put them: a multiboot image that halts at once without a word.
    Each boot is a real QEMU run (TCG, killed at its 3 s limit) that fails the same way every time,
    with a fingerprint, and no kernel is built."""
    for tool in ("qemu-system-x86_64", "busybox", "gcc"):
        require_tool(tool)
    monkeypatch.setenv("PATCHBENCH_ACCEL", "tcg")   # the workers inherit it: no KVM probe of this guest
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    base = commit_files(repo, None, {"Makefile": b"# base\n"}, "base")
    commits = [commit_files(repo, base, {"Makefile": f"# change {n}\n".encode()}, f"change {n}") for n in (1, 2)]
    magic, flags = 0x1BADB002, 0x10000   # flags: load the file as it is, at the addresses below
    halt = struct.pack("<8I", magic, flags, -(magic + flags) & 0xFFFFFFFF, 0x100000, 0x100000, 0, 0, 0x100020)
    halt += bytes([0xFA, 0xF4, 0xEB, 0xFD])   # cli; hlt; jmp back to hlt
    target, cache = Target(repo, base), tmp_path / "w1-cache"
    for commit in commits:
        image = kernel_image(target, commit, cache)
        image.parent.mkdir(parents=True)
        image.write_bytes(halt)
    return [BootJob(target, commit, 1, timeout=1.0, count_calls=False, exercise=False) for commit in commits], cache


def test_a_crash_an_earlier_farm_run_saw_is_named_again(hanging_boots, workers, broker, tmp_path):
    jobs, cache = hanging_boots
    workers.visibility_timeout = 120   # a boot takes seconds: no redelivery while it runs
    workers.start("w1@test", cache=cache)
    store = ResultStore(tmp_path / "results.sqlite")
    ctx = Context(cache=tmp_path / "submitter", logs=tmp_path / "logs", progress=PlainProgress(sys.stderr))
    (first,) = FarmRunner(broker, store=store, timeout=300).run(jobs[:1], ctx)
    assert (first.status, first.worker, first.seen_before) == ("fail", "w1@test", [])
    assert first.fingerprint.startswith("HANG:")
    (again,) = FarmRunner(broker, store=store, timeout=300).run(jobs[1:], ctx)
    assert (again.fingerprint, again.seen_before) == (first.fingerprint, [jobs[0].commit])
    store.close()


def test_farm_progress_says_how_long_a_job_took_where_it_ran(hanging_boots, workers, broker, tmp_path):
    jobs, cache = hanging_boots
    workers.visibility_timeout = 120
    workers.start("w1@test", cache=cache)
    shown = io.StringIO()
    started = time.monotonic()
    FarmRunner(broker, timeout=300).run(jobs[:1], Context(cache=tmp_path / "submitter", logs=tmp_path / "logs",
                                                          progress=PlainProgress(shown)))
    took = time.monotonic() - started
    label = f"patchbench: boot head {jobs[0].commit[:12]}:"
    assert shown.getvalue().startswith(f"{label} started\n")
    seconds = float(re.fullmatch(rf"{re.escape(label)} fail \(.* on w1@test\) in ([\d.]+) s\n",
                                 shown.getvalue().splitlines(keepends=True)[1])[1])
    assert 3 <= seconds <= took   # the guest ran to its 3 s limit, on the worker
    # The worker's log: the job's stages timed from its start, not by the machine's clock.
    stages = re.findall(rf"^{re.escape(label)} (.*) \((\d+) s\)$", (tmp_path / "w1@test.log").read_text(), re.M)
    assert [stage for stage, _ in stages] == ["changed functions and exercises", "initramfs", "probe accelerator",
                                              "boot (tcg)"]
    assert all(int(at) <= took for _, at in stages)


def _comparable(result) -> tuple:
    return (result.kind, result.patch, result.commit, result.status, sorted(result.objects),
            sorted((f.rule, f.file, f.line, f.function, f.message) for f in result.findings))


def test_killed_worker_loses_no_job_and_stores_each_result_once(series_commits, workers, broker, tmp_path,
                                                               monkeypatch):
    repo, base, applied = series_commits
    monkeypatch.setenv("PATCHBENCH_CACHE", str(tmp_path / "local"))
    jobs = check_jobs(applied)
    local = [execute(job, None) for job in jobs]
    assert [r.status for r in local] == ["fail"] + ["pass"] * len(TOUCHED)   # the tun bug, found

    workers.start("w1@test")
    workers.start("w2@test")
    runner = FarmRunner(broker, timeout=300)
    ctx = Context(cache=tmp_path / "submitter", logs=tmp_path / "logs", progress=PlainProgress(sys.stderr))
    out: dict = {}

    def submit_batch():
        runner.store = ResultStore(tmp_path / "results.sqlite")   # SQLite: used by the thread that opens it
        out["results"] = runner.run(jobs, ctx)
        runner.store.close()
    submit = threading.Thread(target=submit_batch)
    submit.start()
    # Kill w1 while it is running a job (a task it has started and not finished).
    victim = None
    deadline = time.monotonic() + 120
    while victim is None:
        assert time.monotonic() < deadline, "w1 never started a job"
        for task_id in list(runner.app.backend.client.scan_iter("celery-task-meta-*")):
            meta = json.loads(runner.app.backend.client.get(task_id))
            if meta["status"] == "STARTED" and (meta.get("result") or {}).get("hostname") == "w1@test":
                victim = meta["task_id"]
        time.sleep(0.05)
    workers.kill("w1@test")
    submit.join(timeout=300)
    assert not submit.is_alive()

    results = out["results"]
    assert [_comparable(r) for r in results] == [_comparable(r) for r in local]
    killed = [r for r, job in zip(results, jobs) if victim.startswith(f"pb-{_id(job)}")]
    assert killed and killed[0].worker == "w2@test"   # the interrupted job ran again, on the survivor
    store = ResultStore(tmp_path / "results.sqlite")
    rows = store.db.execute("SELECT job_id, COUNT(*) FROM results GROUP BY job_id").fetchall()
    assert len(rows) == len(jobs) and all(count == 1 for _, count in rows)
    # A result that arrives twice is one row.
    assert store.add(runner.run_id, repo, results[0], job_id=_id(jobs[0])) is False
    store.close()


def _id(job) -> str:
    from patchbench.dispatch.wire import job_id
    return job_id(job)


def test_a_job_past_the_hard_time_limit_is_killed_reported_as_a_timeout_and_the_next_job_runs(
        series_commits, workers, broker, tmp_path, monkeypatch):
    """The first job's process is stopped (SIGSTOP: as stuck as a process in an uninterruptible wait,
    deaf to the soft limit's signal); Celery kills it at the hard limit, the worker goes on."""
    repo, base, applied = series_commits
    monkeypatch.setenv("PATCHBENCH_CACHE", str(tmp_path / "local"))
    stuck, after = check_jobs(applied)[:2]
    stuck = dataclasses.replace(stuck, timeout=2.0)
    workers.start("w1@test")
    runner = FarmRunner(broker, timeout=300, time_margin=4.0)   # the stuck job's hard limit: 2 + 4 s
    ctx = Context(cache=tmp_path / "submitter", logs=tmp_path / "logs", progress=PlainProgress(sys.stderr))
    out: dict = {}
    submit = threading.Thread(target=lambda: out.update(results=runner.run([stuck, after], ctx)))
    submit.start()
    client = runner.app.backend.client
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, "the first job never started"
        metas = [json.loads(client.get(key)) for key in client.scan_iter("celery-task-meta-*")]
        started = [m for m in metas if m["status"] == "STARTED" and m["task_id"].startswith(f"pb-{_id(stuck)}")]
        if started:
            os.kill(started[0]["result"]["pid"], signal.SIGSTOP)
            break
        time.sleep(0.02)
    started_at = time.monotonic()
    submit.join(timeout=300)
    assert not submit.is_alive()
    timed_out, next_one = out["results"]
    assert (timed_out.status, timed_out.reason) == ("error", "timed out: killed at the farm's time limit of 6 s")
    assert time.monotonic() - started_at < 120   # killed at the limit, not at the visibility timeout's redelivery
    assert next_one.worker == "w1@test" and _comparable(next_one) == _comparable(execute(after, None))


def test_a_broker_restarted_mid_run_loses_no_job_and_one_that_stays_away_ends_the_run(series_commits, tmp_path,
                                                                                       monkeypatch):
    """Redis without persistence, as the README starts it: a restart loses the queues and the results."""
    require_tool("redis-server")
    repo, base, applied = series_commits
    monkeypatch.setenv("PATCHBENCH_CACHE", str(tmp_path / "local"))
    jobs = check_jobs(applied)[:4]
    local = [execute(job, None) for job in jobs]
    server = RedisServer(tmp_path)
    server.start()
    workers = Workers(server.url, tmp_path)
    ctx = Context(cache=tmp_path / "submitter", logs=tmp_path / "logs", progress=PlainProgress(sys.stderr))

    def submit(runner: FarmRunner, out: dict) -> threading.Thread:
        def run():
            try:
                out["results"] = runner.run(jobs, ctx)
            except Exception as exc:
                out["error"] = exc
        thread = threading.Thread(target=run)
        thread.start()
        return thread

    def wait_for(status: str) -> None:
        client = redis.Redis.from_url(server.url)
        deadline = time.monotonic() + 120
        while not any(json.loads(client.get(key) or "{}").get("status") == status
                      for key in client.scan_iter("celery-task-meta-*")):
            assert time.monotonic() < deadline, f"no task reached {status}"
            time.sleep(0.05)
    try:
        workers.start("w1@test")
        out: dict = {}
        thread = submit(FarmRunner(server.url, timeout=600), out)
        wait_for("SUCCESS")   # a result stored, the other tasks queued or running: then the restart
        server.stop()
        time.sleep(1)
        server.start()
        thread.join(timeout=600)
        assert not thread.is_alive() and "error" not in out, out.get("error")
        assert [_comparable(r) for r in out["results"]] == [_comparable(r) for r in local]

        # no worker now: the tasks wait in the queue (a worker would answer these jobs from what it
        # checked above at once, before the broker could be stopped under them)
        workers.stop()
        out = {}
        thread = submit(FarmRunner(server.url, timeout=600, broker_grace=3.0), out)
        client = redis.Redis.from_url(server.url)
        deadline = time.monotonic() + 120
        while not client.llen(CHECK_QUEUE):
            assert time.monotonic() < deadline, "no task was queued"
            time.sleep(0.05)
        server.stop()
        started = time.monotonic()
        thread.join(timeout=60)
        assert not thread.is_alive() and time.monotonic() - started < 30
        assert isinstance(out["error"], BadInput)
        assert re.fullmatch(rf"lost the broker {server.url} for 3 s: the results of [1-4] of 4 task\(s\) did not "
                            r"come \(.*\)", str(out["error"]))
    finally:
        workers.stop()
        if server.proc.poll() is None:
            server.stop()


def test_check_on_the_farm_prints_the_local_report(kernel_clone, workers, broker, tmp_path, capsys, monkeypatch):
    repo, base = kernel_clone
    monkeypatch.setenv("PATCHBENCH_CACHE", str(tmp_path / "local"))
    series = make_series(repo, base, [tun_patch(TUN_HELPER_UNLOCKED_PATH)], tmp_path / "series")
    workers.start("w1@test")
    local_code = main(["check", str(series), "--tree", str(repo), "--format", "json"])
    local = json.loads(capsys.readouterr().out)
    farm_code = main(["check", str(series), "--tree", str(repo), "--format", "json",
                      "--runner", "celery", "--broker", broker])
    captured = capsys.readouterr()
    farm = json.loads(captured.out)
    for report in (local, farm):   # each check's time differs run to run
        for run in report["checks"]:
            run.pop("seconds")
    assert (farm_code, farm) == (local_code, local) and local_code == 1
    assert "on w1@test" in captured.err   # progress says where each job ran
    # and the results say it too, as for builds and boots: the check job, its worker and verdict
    assert main(["results", "--db", str(tmp_path / "local" / "results.sqlite"), "--format", "json"]) == 0
    stored = json.loads(capsys.readouterr().out)
    assert [(job["kind"], job["worker"], job["status"]) for job in stored] == [("check", "w1@test", "fail")]


def test_unreachable_broker_is_one_line_of_bad_input(kernel_clone, tmp_path, capsys):
    repo, base = kernel_clone
    series = make_series(repo, base, [tun_patch(TUN_HELPER_UNLOCKED_PATH)], tmp_path / "series")
    code = main(["check", str(series), "--tree", str(repo), "--runner", "celery",
                 "--broker", f"redis://127.0.0.1:{free_port()}/0"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("patchbench: error: cannot reach the broker") and err.count("\n") == 1


@pytest.mark.slow
def test_build_on_the_farm_matches_the_local_build_and_stays_on_the_warm_worker(kernel_tree, broker, workers,
                                                                                 tmp_path):
    from tests.support.planted import plant

    for tool in ("make", "gcc", "ccache", "bwrap", "flex", "bison", "bc"):
        require_tool(tool)
    base = kernel.base_commit(kernel_tree)
    head, commits = plant(kernel_tree, "warning-series", base)

    def build(*extra: str) -> dict:
        proc = subprocess.run([sys.executable, "-m", "patchbench", "build", f"{base}..{head}", "--tree",
                               str(kernel_tree), "--format", "json", "--results", str(tmp_path / "r.sqlite"),
                               *extra], cwd=ROOT, capture_output=True, text=True, timeout=3600)
        assert proc.returncode == 1, proc.stderr   # the planted warnings
        return json.loads(proc.stdout)

    local = build()
    workers.visibility_timeout = 3600   # builds take minutes: no redelivery while one runs
    # The worker shares this machine's build cache: the base/config is warm there.
    workers.start("w1@test", cache=Path(os.environ.get("PATCHBENCH_CACHE", Path.home() / ".cache" / "patchbench")))
    workers.start("w2@test")
    farm = build("--runner", "celery", "--broker", broker)

    def same(job: dict) -> dict:
        return {k: v for k, v in job.items() if k not in ("seconds", "log", "worker")}
    assert [same(j) for j in farm["jobs"]] == [same(j) for j in local["jobs"]]
    assert {j["worker"] for j in farm["jobs"]} == {"w1@test"}   # every build went where the base is warm
