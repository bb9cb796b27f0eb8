"""A real redis-server and real `patchbench worker` processes on loopback, for tests and benches."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from patchbench.dispatch.farm import make_app

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A private redis-server on a free loopback port, without persistence (a restart loses everything)."""

    def __init__(self, workdir: Path):
        self.workdir, self.port, self.proc = workdir, free_port(), None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen([shutil.which("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no", "--dir", str(self.workdir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        ping = ["redis-cli", "-p", str(self.port), "ping"]
        while subprocess.run(ping, capture_output=True, timeout=10).stdout.strip() != b"PONG":
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@contextmanager
def redis_server(workdir: Path) -> Iterator[str]:
    """A RedisServer for the duration; yields its URL."""
    server = RedisServer(workdir)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def served_copy(tree: Path, copy: Path) -> Path:
    """`tree` as a git server offers it: a bare copy, packed once (the cached trees' objects are
    loose; packed, each worker's fetch copies them rather than compressing 80 000 objects)."""
    git = ["git", "-c", "pack.compression=1"]
    subprocess.run([*git, "clone", "-q", "--bare", "--shared", str(tree), str(copy)], check=True, timeout=600)
    subprocess.run([*git, "-C", str(copy), "repack", "-a", "-d", "-q", "--window=0"], check=True, timeout=1800)
    (copy / "objects" / "info" / "alternates").unlink()
    return copy


def kept_served_copy(tree: Path) -> Path:
    """A served_copy of `tree` kept in the tests' cache (one per tree), made on first use: workers whose
    homes are kept too (`Workers(homes=...)`) then find the same URL, so the same mirror and warm build
    directories, run after run."""
    from tests.support.kernel import CACHE

    copy = CACHE / f"farm-served-{tree.name}.git"
    with open(CACHE / ".farm-served.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # one maker at a time, across pytest processes and benches
        if not (copy / "patchbench-ready").exists():
            shutil.rmtree(copy, ignore_errors=True)
            served_copy(tree, copy)
            (copy / "patchbench-ready").touch()
    return copy


def seed_index(home: Path) -> None:
    """Give a worker's home hard links to this machine's call index (whole trees, by blob id: minutes
    to build from nothing), as a farm would ship it; the worker's facts cache stays its own."""
    from patchbench.checks.callindex.store import cache_dir

    shared = cache_dir()
    own = home / ".cache" / "patchbench" / "callindex" / shared.name
    if own.exists():   # a kept home, seeded on an earlier run
        return
    own.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-al", str(shared), str(own)], check=True, timeout=600)


class Workers:
    """`patchbench worker` processes, each in its own session (a SIGKILL takes the whole worker)."""

    def __init__(self, url: str, root: Path, visibility_timeout: float = 6.0, homes: Path | None = None):
        """Logs go under `root`; so do the workers' homes unless `homes` keeps them elsewhere (across
        runs, as a farm machine keeps its cache)."""
        # Short, so a killed worker's job comes back soon; longer than any job these workers run.
        self.url, self.root, self.homes, self.procs = url, root, homes or root, {}
        self.visibility_timeout = visibility_timeout

    def start(self, name: str, cache: Path | None = None, alone: tuple[Path, ...] | None = None) -> None:
        """`alone`: under bubblewrap as on a machine of its own: a home of its own (its cache there,
        homes/name/home), the host's /tmp and ~/.cache hidden, the paths `alone` lists read-only, the
        rest of the host read-only. Only the network is shared with the host."""
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PATCHBENCH_CACHE": str(cache or self.root / name)}
        argv = [sys.executable, "-m", "patchbench", "worker", "--broker", self.url, "--name", name,
                "--visibility-timeout", str(self.visibility_timeout)]
        if alone is not None:
            home = self.home(name)
            home.mkdir(parents=True, exist_ok=True)
            env = {k: v for k, v in env.items() if not k.startswith(("PATCHBENCH_", "XDG_", "GIT_"))}
            env.update(HOME=str(home), PYTHONPATH=str(ROOT))
            # The host's home stays (Python may be installed there); its caches (kernel trees, call
            # index, build directories) go.
            hide = ["--tmpfs", "/tmp", "--tmpfs", str(Path.home() / ".cache")]
            # The host's /proc and /dev as they are: a worker's own bubblewrap (around a build) could not
            # mount a proc inside a second one; QEMU wants /dev/kvm.
            argv = [shutil.which("bwrap"), "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--bind", "/proc",
                    "/proc", *hide, "--bind", str(home), str(home),
                    *(arg for path in alone for arg in ("--ro-bind", path, path)), "--die-with-parent", *argv]
        with open(self.root / f"{name}.log", "w") as log:
            self.procs[name] = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                start_new_session=True)
        client = make_app(self.url).connection_for_write().default_channel.client
        deadline = time.monotonic() + 60
        while not client.exists(f"patchbench:alive:{name}"):
            if self.procs[name].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker {name} did not come up: {(self.root / f'{name}.log').read_text()}")
            time.sleep(0.2)

    def home(self, name: str) -> Path:
        return self.homes / name / "home"

    def running(self, name: str, program: str) -> list[int]:
        """Pids of `program` among the worker's descendants (make and QEMU run in sessions of their own)."""
        return [pid for pid, comm in descendants(self.procs[name].pid) if comm == program[:15]]

    def kill(self, name: str) -> None:
        """SIGKILL the worker and everything it started, as a machine that goes down (or systemd's
        KillMode=control-group) would: a QEMU or make of a job in its own session too."""
        below = descendants(self.procs[name].pid)
        os.killpg(self.procs[name].pid, signal.SIGKILL)
        for pid, _ in below:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.procs[name].wait()

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for name, proc in self.procs.items():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill(name)
        self.procs.clear()


def descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, command name) of the processes below `pid`, now (from /proc's parent links)."""
    children: dict[int, list[tuple[int, str]]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:   # gone meanwhile
            continue
        comm, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 1:].split()
        children.setdefault(int(rest[1]), []).append((int(stat.parent.name), comm))
    found, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += [child for child, _ in below]
    return found


def started_on(broker: str, worker: str, proc: subprocess.Popen) -> str:
    """The id of a task `worker` has started and not finished, as soon as there is one."""
    client = make_app(broker).backend.client
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        for key in list(client.scan_iter("celery-task-meta-*")):
            meta = json.loads(client.get(key) or "{}")
            if meta.get("status") == "STARTED" and (meta.get("result") or {}).get("hostname") == worker:
                return meta["task_id"]
        time.sleep(0.05)
    raise AssertionError(f"{worker} never started a job: {proc.stderr.read() if proc.poll() is not None else ''}")
