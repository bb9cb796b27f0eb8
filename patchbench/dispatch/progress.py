"""Show jobs as they run: a live panel (stage, patch, elapsed, log tail) on a terminal, log lines otherwise."""

from __future__ import annotations

import sys
import time
from collections import deque
from typing import TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text


def _label(kind: str, patch: int | None, commit: str) -> str:
    where = f"patch {patch}" if patch is not None and kind == "objects" else "head"
    return f"{kind} {where} {commit[:12]}"


class PlainProgress:
    """One line per stage change and per finished job; nothing per compiler line."""

    def __init__(self, stream: TextIO = sys.stderr):
        self.stream = stream
        self.label = ""
        self.started = 0.0

    def start(self, kind: str, patch: int | None, commit: str) -> None:
        self.label, self.started = _label(kind, patch, commit), time.monotonic()
        print(f"patchbench: {self.label}: started", file=self.stream, flush=True)

    def stage(self, text: str) -> None:
        print(f"patchbench: {self.label}: {text} ({time.monotonic() - self.started:.0f} s)",
              file=self.stream, flush=True)

    def line(self, text: str) -> None:
        pass

    def finish(self, status: str, reason: str, seconds: float | None = None) -> None:
        """`seconds`: how long the job took where it ran (on a farm worker); None: since start()."""
        detail = f" ({reason})" if reason else ""
        print(f"patchbench: {self.label}: {status}{detail} in {self._took(seconds):.1f} s",
              file=self.stream, flush=True)

    def _took(self, seconds: float | None) -> float:
        return time.monotonic() - self.started if seconds is None else seconds

    def close(self) -> None:
        pass


class LiveProgress(PlainProgress):
    """A rich panel redrawn in place, with the last lines of the running command's output."""

    TAIL = 6

    def __init__(self, stream: TextIO = sys.stderr):
        super().__init__(stream)
        self.console = Console(file=stream)
        self.current = ""
        self.tail: deque[str] = deque(maxlen=self.TAIL)
        self.live = Live(console=self.console, refresh_per_second=4, get_renderable=self._render)
        self.live.start()

    def _render(self) -> Group:
        if not self.label:
            return Group()
        head = Text(f"{self.label}  {self.current}  {time.monotonic() - self.started:5.0f} s", style="bold")
        return Group(head, *(Text("  " + line[-150:], style="dim") for line in self.tail))

    def start(self, kind: str, patch: int | None, commit: str) -> None:
        self.label, self.started, self.current = _label(kind, patch, commit), time.monotonic(), ""
        self.tail.clear()

    def stage(self, text: str) -> None:
        self.current = text

    def line(self, text: str) -> None:
        self.tail.append(text)

    def finish(self, status: str, reason: str, seconds: float | None = None) -> None:
        style = {"pass": "green", "fail": "red", "error": "red", "skip": "yellow"}.get(status, "")
        detail = f" ({reason})" if reason else ""
        self.console.print(Text(f"{self.label}: {status}{detail} in {self._took(seconds):.1f} s", style=style))
        self.label = ""

    def close(self) -> None:
        self.live.stop()


def for_stream(stream: TextIO = sys.stderr) -> PlainProgress:
    return LiveProgress(stream) if stream.isatty() else PlainProgress(stream)
