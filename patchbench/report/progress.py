"""A one-line status for `lint` and `check` on a terminal: what runs now, how far, for how long.

It appears only once the command has run for more than a second ($PATCHBENCH_PROGRESS_DELAY
changes that), only when stderr is a terminal,
and never for the machine formats (json, sarif); it is redrawn in place and erased at the end,
so nothing of it stays in the output. `count` is a counter shared with forked worker processes
(multiprocessing.Value) that the workers raise as they finish files.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
from typing import TextIO

DELAY_ENV = "PATCHBENCH_PROGRESS_DELAY"   # seconds before the line appears (default 1)
MACHINE_FORMATS = ("json", "sarif")


class Progress:
    def __init__(self, command: str, fmt: str, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.command = command
        self.enabled = fmt not in MACHINE_FORMATS and self.stream.isatty()
        self.count = multiprocessing.get_context("fork").Value("q", 0)
        self.text, self.total = "", 0
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._shown = False            # drawn at least once: erase at the end
        self._drawn = False            # the status is on the terminal's current line now
        self._partial = False          # stderr's last write did not end its line: do not draw
        self._lock = threading.Lock()  # the drawing thread and stderr writers of this process
        self._pid = os.getpid()

    def stage(self, text: str, total: int = 0) -> None:
        """Now doing `text`; with `total`, the shared count goes from 0 towards it."""
        self.text, self.total = text, total
        self.count.value = 0

    def tick(self) -> None:
        """One more item done (safe to call from forked workers)."""
        with self.count.get_lock():
            self.count.value += 1

    def _line(self) -> str:
        done = f" {self.count.value}/{self.total}" if self.total else ""
        return f"patchbench {self.command}: {self.text}{done} ({time.monotonic() - self.started:.0f} s)"

    def _write(self, text: str) -> None:
        # straight to the descriptor: a worker forked while this thread held the stream's lock
        # would otherwise inherit it locked
        os.write(self.stream.fileno(), text.encode())

    def _run(self) -> None:
        try:
            delay = float(os.environ.get(DELAY_ENV, "1"))
        except ValueError:
            delay = 1.0
        if self._stop.wait(delay):
            return
        while True:
            with self._lock:
                if self.text and not self._partial:
                    self._write("\r\x1b[K" + self._line())
                    self._shown = self._drawn = True
            if self._stop.wait(0.25):
                return

    def __enter__(self) -> "Progress":
        if self.enabled:
            self._saved_stderr, sys.stderr = sys.stderr, _Clearing(sys.stderr, self)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if not self.enabled:
            return
        self._stop.set()
        self._thread.join()
        sys.stderr = self._saved_stderr
        if self._shown:
            self._write("\r\x1b[K")


class _Clearing:
    """sys.stderr while the line is up: a warning printed meanwhile first erases it, so that it
    gets a line of its own (the next redraw puts the status back under it)."""

    def __init__(self, stream: TextIO, progress: Progress):
        self._stream, self._progress = stream, progress

    def write(self, text: str) -> int:
        progress = self._progress
        if os.getpid() != progress._pid:   # a forked worker: its copy of the lock may be held
            return self._stream.write(text)
        with progress._lock:
            if progress._drawn and text:
                progress._write("\r\x1b[K")
                progress._drawn = False
            written = self._stream.write(text)
            self._stream.flush()
            if text:
                progress._partial = not text.endswith("\n")
        return written

    def __getattr__(self, name: str):
        return getattr(self._stream, name)
