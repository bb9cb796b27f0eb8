"""Run one command of an untrusted series: bubblewrap (no network, writes only where allowed) and a timeout."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from patchbench.errors import BadInput

LineSink = Callable[[str], None]
PR_SET_PDEATHSIG = 1               # <linux/prctl.h>
_prctl = ctypes.CDLL(None, use_errno=True).prctl   # looked up here: the child between fork and exec only calls it


@dataclass
class Completed:
    returncode: int | None         # None when killed at the timeout
    output: str                    # stdout and stderr interleaved, as printed
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def bwrap_prefix(writable: list[Path], readable: list[Path] = ()) -> list[str]:
    """Read-only view of the host, private /tmp, no network; only `writable` can be written.

    The private /tmp hides whatever the host keeps there: paths the command needs that may live under
    /tmp (a build directory, a repository) must be listed in `writable` or `readable`."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise BadInput("bubblewrap (bwrap) is not installed; it sandboxes untrusted builds "
                       "(apt-get install bubblewrap, or pass --no-sandbox for a trusted series)")
    cmd = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
           "--unshare-all", "--die-with-parent"]
    for path in readable:
        cmd += ["--ro-bind", str(path), str(path)]
    for path in writable:
        cmd += ["--bind", str(path), str(path)]
    return cmd


def run(argv: list[str], *, timeout: float, log: Path, cwd: Path | None = None,
        env: dict[str, str] | None = None, sandbox: list[Path] | None = None, readable: list[Path] = (),
        on_line: LineSink | None = None) -> Completed:
    """Run argv (inside bwrap when `sandbox` lists the writable paths, `readable` the read-only ones
    that may be under /tmp), logging every line.

    The whole process group is killed at `timeout` seconds; the log says so. The command dies with
    this process (a worker SIGKILLed mid-job leaves no QEMU or make behind): its own process by a
    parent-death signal, and under bwrap everything it started (bwrap's --die-with-parent ends its
    PID namespace).
    """
    if sandbox is not None:
        argv = bwrap_prefix(sandbox, readable) + argv
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    lines: list[str] = []
    with open(log, "a", encoding="utf-8", errors="replace") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        proc = subprocess.Popen(argv, cwd=cwd, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_dies_with(os.getpid()))
        fired = threading.Event()
        timer = threading.Timer(timeout, lambda: (fired.set(), _kill_group(proc)))
        timer.start()
        try:
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace")
                lines.append(line)
                out.write(line)
                if on_line:
                    on_line(line.rstrip("\n"))
            proc.wait()
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            timer.cancel()
        killed = fired.is_set()
        seconds = time.monotonic() - start
        if killed:
            out.write(f"patchbench: killed after {timeout:.0f} s timeout\n")
    return Completed(None if killed else proc.returncode, "".join(lines), seconds)


def _dies_with(parent: int) -> Callable[[], None]:
    """What the child does between fork and exec: be SIGKILLed when its parent dies. The kernel sends
    the signal when the *thread* that forked exits; run() forks and waits for the command in the same
    call, so that thread outlives the command."""
    def in_child() -> None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:   # the parent died before the signal was set: nothing would come
            os._exit(1)
    return in_child


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
