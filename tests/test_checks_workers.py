"""The checker's worker processes: clean shutdown after success, and after SIGINT/SIGTERM at any moment.

A hang must fail a test, never hang the suite: every wait below has a timeout."""

from __future__ import annotations

import gc
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from patchbench.checks.engine import pool, registry
from patchbench.checks.run import checkfile
from patchbench.commands.lint import lint
from patchbench.errors import CheckFailed
from tests.support.git_series import commit_files, format_patch, git

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = sorted((ROOT / "fixtures" / "checks").rglob("*.c"))


def _children_with(marker: str) -> list[int]:
    """Processes still alive whose environment carries marker (the command and anything it forked)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_two_hundred_runs_in_a_row_each_stop_their_workers(tmp_path):
    """Each run forks its workers and must reap all of them: no hang, no process left over."""
    files = [str(p) for p in FIXTURES[:4]]
    expected = lint(files, jobs=1, use_cache=False)
    assert expected, "the fixtures hold planted bugs"
    before = set(_children_of(os.getpid()))
    started = time.monotonic()
    for _ in range(200):
        assert lint(files, jobs=2, use_cache=False) == expected
        assert time.monotonic() - started < 600, "200 small lints should take seconds, not minutes"
    assert set(_children_of(os.getpid())) == before


def _children_of(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_a_worker_that_dies_is_an_error_naming_its_task():
    def die(task):
        if task == "b.c":
            os._exit(3)
        return task
    with pytest.raises(CheckFailed, match=r"worker died \(exit 3\) while checking b.c"):
        pool.run_all(die, ["a.c", "b.c", "c.c", "d.c"], 2)


def test_results_come_back_in_task_order_across_recycled_workers(monkeypatch):
    monkeypatch.setattr(pool, "TASKS_PER_WORKER", 3)
    results = pool.run_all(lambda n: (n, os.getpid()), list(range(40)), 2)
    assert [n for n, _ in results] == list(range(40))
    assert len({pid for _, pid in results}) >= 40 // 3   # each worker served at most 3 tasks


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> Path:
    """A directory of enough C files (copies of our fixtures) for a lint of a few seconds."""
    where = tmp_path_factory.mktemp("workload")
    for copy in range(12):
        for path in FIXTURES:
            shutil.copy2(path, where / f"{copy}_{path.parent.name}_{path.name}")
    return where


@pytest.fixture(scope="module")
def series_repo(workload: Path, tmp_path_factory) -> tuple[Path, Path]:
    """A small repository (the workload's files) and a 2-patch series touching every file."""
    repo = tmp_path_factory.mktemp("series") / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    files = sorted(workload.glob("*.c"))[:60]
    base = commit_files(repo, None, {f"drivers/{p.name}": p.read_bytes() for p in files}, "base")
    first = commit_files(repo, base, {f"drivers/{p.name}": p.read_bytes() + b"/* one */\n" for p in files},
                         "demo: one\n\nSigned-off-by: A <a@example.org>")
    second = commit_files(repo, first, {f"drivers/{p.name}": p.read_bytes() + b"/* one */\n/* two */\n"
                                        for p in files}, "demo: two\n\nSigned-off-by: A <a@example.org>")
    git(repo, "update-ref", "refs/heads/main", base)
    git(repo, "symbolic-ref", "HEAD", "refs/heads/main")
    mails = format_patch(repo, base, second, repo.parent / "mails")
    return repo, mails[0].parent


COMMANDS = {
    "lint": lambda workload, series: ["lint", "-j2", "--no-cache", str(workload)],
    "check": lambda workload, series: ["check", str(series[1]), "--tree", str(series[0])],
}


@pytest.mark.parametrize("command,signum,group", [
    ("lint", signal.SIGINT, True), ("lint", signal.SIGTERM, False), ("lint", signal.SIGINT, False),
    ("lint", signal.SIGTERM, True), ("check", signal.SIGINT, True), ("check", signal.SIGTERM, False)])
def test_interrupt_at_random_moments(workload: Path, series_repo, tmp_path, command, signum, group):
    """Ctrl-C (SIGINT to the process group) or SIGTERM at a random moment: exit 130 with one line,
    no traceback, no process left behind, no git lock left in the repository. A run that finished
    first must have exited normally."""
    rng = random.Random(f"{command}{signum}{group}")
    for attempt in range(6):
        marker = f"PATCHBENCH_TEST_RUN={uuid.uuid4().hex}"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PATCHBENCH_CACHE": str(tmp_path / "cache"),
               marker.split("=")[0]: marker.split("=")[1]}
        # SIGINT as an interactive shell leaves it (a background job inherits it ignored).
        proc = subprocess.Popen([sys.executable, "-m", "patchbench", *COMMANDS[command](workload, series_repo)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                                start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        # A random moment once the command runs (the interpreter's own start-up is not ours to
        # guard): the workers are forked, working, being replaced or stopping.
        deadline = time.monotonic() + 60
        while not _children_of(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 1.5))
        if group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"attempt {attempt}: still running 60 s after {signum.name}")
        text = err.decode()
        assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
        assert proc.returncode in (130, 0, 1), text
        if proc.returncode == 130:
            assert text == "patchbench: error: interrupted\n"
        deadline = time.monotonic() + 10
        while _children_with(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _children_with(marker) == [], f"attempt {attempt}: processes left after {signum.name}"
        assert not list((series_repo[0] / ".git").rglob("*.lock")), "a git lock file was left behind"


def _pid_after_sleeping(seconds: float) -> tuple[float, int]:
    time.sleep(seconds)
    return seconds, os.getpid()


def test_largest_tasks_are_handed_out_first_and_results_keep_task_order():
    """Two workers, sizes 1, 1, 1, 8: the large task goes out first, so one worker takes it while
    the other does the three small ones (in task order the large one would start last and run
    alone at the end), and every result still comes back at its task's place."""
    tasks = [0.1, 0.1, 0.1, 0.8]
    results = pool.run_all(_pid_after_sleeping, tasks, 2, sizes=[1, 1, 1, 8])
    assert [seconds for seconds, _ in results] == tasks
    large_worker = results[3][1]
    assert all(pid != large_worker for _, pid in results[:3]), "the small tasks share the other worker"


def test_each_worker_takes_its_own_share_in_order_then_the_back_of_the_largest_left():
    """Without sizes (lint: a directory's files side by side), worker slot 0 takes the first half
    of the tasks in order and slot 1 the second, so that one worker does most of a directory;
    a slot whose share is done takes from the back of the longest share left."""
    shares = pool._Shares(range(7), 2)
    assert [shares.take(0), shares.take(1), shares.take(0), shares.take(1)] == [0, 4, 1, 5]
    assert [shares.take(1), shares.take(1), shares.take(1)] == [6, 3, 2]
    assert shares.take(0) is None and shares.take(1) is None
    one = pool._Shares([3, 1, 2], 1)   # largest first (check): one list for every slot
    assert [one.take(1), one.take(0), one.take(1), one.take(0)] == [3, 1, 2, None]


def test_a_checked_file_leaves_no_cycle_for_the_collector():
    """Workers run each file with the cyclic collector off (pool._collected_after): that holds only
    while everything a file's check builds is freed by reference counting once it ends. A rule
    that keeps a cycle (an analysis pointing back at its model, a recursive closure) shows here as
    objects only the collector can free."""
    every_rule = {rule.ID for rule in registry.rules()}
    sources = [(str(path.relative_to(ROOT)), path.read_bytes()) for path in FIXTURES]
    for path, source in sources:   # first runs fill the caches that live on
        checkfile.check_source(path, source, every_rule)
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for path, source in sources:
            checkfile.check_source(path, source, every_rule)
        assert gc.collect() == 0
    finally:
        if was_enabled:
            gc.enable()
