"""Read a guest's serial console: find kernel splats and fingerprint each by its first stack frames.

A fingerprint is the splat kind and the first meaningful function names of its trace, without
offsets, addresses, PIDs or line numbers, so the same crash gives the same fingerprint on every run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SMOKE_STATUS = re.compile(r"PATCHBENCH-SMOKE: (?P<status>PASS|FAIL)(?: (?P<detail>.*))?")
_TIMESTAMP = re.compile(r"^\[\s*\d+\.\d+\]\s?")
# (kind, header pattern); the first match on a line opens a splat.
_HEADERS = [
    ("LOCKDEP", re.compile(r"WARNING: (possible (circular|recursive) locking|inconsistent lock state|"
                           r"possible irq lock inversion|bad unlock balance|held lock freed|"
                           r"lock held when returning)")),
    ("RCU", re.compile(r"WARNING: suspicious RCU usage")),
    ("WARNING", re.compile(r"WARNING: CPU: \d+ PID: \d+ at ")),
    ("BUG", re.compile(r"BUG: |kernel BUG at |general protection fault")),
    ("HUNG_TASK", re.compile(r"INFO: task \S+ blocked for more than \d+ seconds")),
    ("RCU_STALL", re.compile(r"rcu: INFO: \S+ (self-)?detected stalls?")),
    ("KMEMLEAK", re.compile(r"^unreferenced object 0x|kmemleak: \d+ new suspected memory leaks")),
    ("PANIC", re.compile(r"Kernel panic - not syncing")),
    ("STALL", re.compile(r"PATCHBENCH-STALL: ")),
]
# "PATCHBENCH-STALL: tun pbring0 tx queue: no packet for 2 s ...": the driver and what stalled, without
# the device name, are its fingerprint's frames (a stall has no stack of its own).
_STALL = re.compile(r"PATCHBENCH-STALL: (?P<driver>\S+) \S+ (?P<what>[^:]+):")
_FRAME = re.compile(r"^\s*(?P<unreliable>\? )?(?P<func>[A-Za-z_][\w.]*)\+0x[0-9a-f]+/0x[0-9a-f]+")
_RIP = re.compile(r"^RIP: \d+:(?P<func>[A-Za-z_][\w.]*)\+0x")
# Frames every splat of a kind passes through: they say how it was reported, not where.
_GENERIC = {
    "dump_stack", "dump_stack_lvl", "show_stack", "__warn", "warn_slowpath_fmt", "report_bug",
    "handle_bug", "exc_invalid_op", "asm_exc_invalid_op", "lockdep_rcu_suspicious", "__schedule",
    "schedule", "schedule_timeout", "schedule_timeout_uninterruptible", "schedule_timeout_interruptible",
    "schedule_timeout_killable", "schedule_preempt_disabled", "io_schedule", "panic",
    "print_circular_bug", "check_noncircular", "check_prev_add", "validate_chain", "__lock_acquire",
    "lock_acquire", "print_usage_bug", "mark_lock", "kmemleak_alloc", "__kmem_cache_alloc_node",
    "kmalloc_trace", "__kmalloc", "slab_post_alloc_hook", "kmem_cache_alloc", "rcu_read_lock_held",
}
FRAMES_IN_FINGERPRINT = 3


@dataclass
class Splat:
    kind: str                      # WARNING | BUG | LOCKDEP | RCU | HUNG_TASK | RCU_STALL | KMEMLEAK | PANIC | STALL
    title: str                     # the header line
    frames: list[str]              # function names, innermost first, generic frames dropped
    guessed: list[str] = field(default_factory=list)   # frames the unwinder marked "?" (unreliable)

    @property
    def fingerprint(self) -> str:
        # A kernel without a reliable unwinder marks every frame "?": then the guesses are all there is.
        frames = self.frames if len(self.frames) > 1 else self.frames + self.guessed
        return f"{self.kind}:" + "|".join(frames[:FRAMES_IN_FINGERPRINT])


def clean_line(line: str) -> str:
    """A console line without its printk timestamp."""
    return _TIMESTAMP.sub("", line.rstrip("\r"))


def _function(name: str) -> str:
    # gcc clones (foo.isra.0, foo.constprop.3, foo.cold) are the same function for a reader.
    return name.split(".", 1)[0]


def splats(console: str) -> list[Splat]:
    """Every splat in console order; a trace belongs to the most recent header before it."""
    found: list[Splat] = []
    current: Splat | None = None
    for raw in console.splitlines():
        line = clean_line(raw)
        kind = next((k for k, pattern in _HEADERS if pattern.search(line)), None)
        if kind == "PANIC" and current is not None:
            continue  # "Kernel panic" after an oops is a consequence: the oops is the fingerprint
        if kind == "STALL":
            m = _STALL.search(line)
            found.append(Splat(kind, line[line.index("PATCHBENCH-STALL: "):].strip(),
                               [m["driver"], m["what"].replace(" ", "-")] if m else []))
            current = None
            continue
        if kind is not None:
            current = Splat(kind, line.strip(), [])
            found.append(current)
            continue
        if current is None:
            continue
        if m := _RIP.match(line.strip()):
            _add(current.frames, m["func"])
        elif m := _FRAME.match(line):
            _add(current.guessed if m["unreliable"] else current.frames, m["func"])
    return found


def _add(frames: list[str], name: str) -> None:
    func = _function(name)
    if func not in _GENERIC and func not in frames:
        frames.append(func)


def smoke_status(console: str) -> tuple[str | None, str]:
    """("PASS"|"FAIL"|None, detail) from the guest's status line; None when it never printed one."""
    for line in reversed(console.splitlines()):
        if m := SMOKE_STATUS.search(line):
            return m["status"], (m["detail"] or "").strip()
    return None, ""


def last_words(console: str, count: int = 3) -> list[str]:
    """The last non-empty console lines, for a report on a guest that went silent."""
    return [line for line in (clean_line(l).strip() for l in console.splitlines()) if line][-count:]


def normalise(line: str) -> str:
    """A console line without the numbers (PIDs, addresses, times) that differ between runs."""
    return re.sub(r"0x[0-9a-f]+|\d+", "N", line)
