"""A real redis-server and real `patchbench worker` processes on loopback, for tests and benches."""

from __future__ import annotations

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


def seed_index(home: Path) -> None:
    """Give a worker's home hard links to this machine's call index (whole trees, by blob id: minutes
    to build from nothing), as a farm would ship it; the worker's facts cache stays its own."""
    from patchbench.checks.callindex.store import cache_dir

    shared = cache_dir()
    own = home / ".cache" / "patchbench" / "callindex" / shared.name
    own.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-al", str(shared), str(own)], check=True, timeout=600)


class Workers:
    """`patchbench worker` processes, each in its own session (a SIGKILL takes the whole worker)."""

    def __init__(self, url: str, root: Path, visibility_timeout: float = 6.0):
        # Short, so a killed worker's job comes back soon; longer than any job these workers run.
        self.url, self.root, self.procs = url, root, {}
        self.visibility_timeout = visibility_timeout

    def start(self, name: str, cache: Path | None = None, alone: tuple[Path, ...] | None = None) -> None:
        """`alone`: under bubblewrap as on a machine of its own: a home of its own (its cache there,
        root/name/home), the host's /tmp and ~/.cache hidden, the paths `alone` lists read-only, the
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
        return self.root / name / "home"

    def kill(self, name: str) -> None:
        os.killpg(self.procs[name].pid, signal.SIGKILL)
        self.procs[name].wait()

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()
