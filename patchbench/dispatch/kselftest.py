"""Kselftests in the boot guest: which to run, building them from the series' own worktree, reading their TAP.

A selection is a kselftest TARGET (a directory under tools/testing/selftests, e.g. `net/af_unix`) or
TARGET:TEST for one test of it, as `run_kselftest.sh -c` and `-t` take them. The target is built and
installed with the kernel's own selftests Makefile, inside the build slot and sandbox of the kernel
build; its files, and the shared libraries its programs need, go into the guest's initramfs.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from patchbench.dispatch import sandbox
from patchbench.dispatch.console import clean_line
from patchbench.errors import BadInput

SELFTESTS = "tools/testing/selftests"
GUEST_DIR = "kselftest"              # where the install tree lives in the guest
ARGS_FILE = "patchbench-args"        # run_kselftest.sh's arguments, read by the guest's init
BEGIN, END = "PATCHBENCH-KSELFTEST-BEGIN", "PATCHBENCH-KSELFTEST-END"
_NAME = re.compile(r"^[A-Za-z0-9_.+-]+(/[A-Za-z0-9_.+-]+)*$")
# run_kselftest.sh reports each test on an unindented TAP line; nested TAP of the test itself is "# "-prefixed.
_TAP = re.compile(r"^(?P<not>not )?ok \d+ (?P<name>.*?)(?:\s+#\s*(?P<directive>\S+).*)?$")
# Interpreters of installed scripts that busybox does not provide, copied in from the host.
COPIED_INTERPRETERS = ("bash",)
# runner.sh gives each test its time limit only through this path (busybox's timeout lacks --foreground):
# with it a hanging test is reported "not ok ... # TIMEOUT" instead of hanging the whole boot.
HOST_TIMEOUT = Path("/usr/bin/timeout")


@dataclass(frozen=True)
class Selection:
    target: str
    test: str | None = None          # None: every test of the target

    @classmethod
    def parse(cls, spec: str) -> "Selection":
        target, _, test = spec.partition(":")
        if not _NAME.match(target) or ".." in target.split("/") or (test and "/" in test) \
                or (":" in spec and not _NAME.match(test)):
            raise BadInput(f"--kselftest {spec!r}: expected TARGET or TARGET:TEST, "
                           f"TARGET a directory under {SELFTESTS} (e.g. net/af_unix or net/af_unix:unix_connect)")
        return cls(target, test or None)

    def __str__(self) -> str:
        return f"{self.target}:{self.test}" if self.test else self.target

    def runner_args(self) -> list[str]:
        return ["-t", str(self)] if self.test else ["-c", self.target]


@dataclass(frozen=True)
class KselftestResult:
    target: str
    test: str
    status: str                      # pass | fail | skip

    def to_json(self) -> dict:
        return {"target": self.target, "test": self.test, "status": self.status}


@dataclass(frozen=True)
class GuestFile:
    """A file for the initramfs: its path in the guest, mode and content."""
    name: str
    mode: int
    data: bytes


def missing_targets(selections: tuple[Selection, ...], src: Path) -> list[str]:
    return sorted({s.target for s in selections if not (src / SELFTESTS / s.target / "Makefile").is_file()})


def guest_files(install: Path, selections: tuple[Selection, ...], sandboxed: bool = True) -> list[GuestFile]:
    """The install tree under /kselftest, the runner's arguments, and what its programs need from the host.

    The programs were built from the untrusted series, so ldd (which may run a program's own loader)
    looks at them inside the sandbox.
    """
    files = [GuestFile(f"{GUEST_DIR}/{ARGS_FILE}", 0o100644,
                       " ".join(a for s in selections for a in s.runner_args()).encode() + b"\n")]
    needed: dict[str, Path] = {}   # path in the guest -> host file
    if HOST_TIMEOUT.is_file():
        needed |= {str(HOST_TIMEOUT): HOST_TIMEOUT, **_shared_libraries(HOST_TIMEOUT, sandboxed=False)}
    for path in sorted(install.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        files.append(GuestFile(f"{GUEST_DIR}/{path.relative_to(install)}", 0o100000 | (path.stat().st_mode & 0o777),
                               data))
        if data.startswith(b"\x7fELF"):
            needed |= _shared_libraries(path, sandboxed)
        elif interpreter := _copied_interpreter(data):
            needed |= {interpreter[0]: interpreter[1], **_shared_libraries(interpreter[1], sandboxed=False)}
    # The content is the file a host symlink (libc.so.6, ld-linux) points to.
    files += [GuestFile(name.lstrip("/"), 0o100755, host.resolve().read_bytes()) for name, host in sorted(needed.items())]
    return files


def _copied_interpreter(script: bytes) -> tuple[str, Path] | None:
    """(path in the guest, host file) of a script's interpreter that busybox does not provide."""
    if not script.startswith(b"#!"):
        return None
    words = script[2:].split(b"\n", 1)[0].decode(errors="replace").split() or [""]
    via_env = words[0].endswith("/env") and len(words) > 1
    name = Path(words[1] if via_env else words[0]).name
    host = shutil.which(name) if name in COPIED_INTERPRETERS else None
    if host is None:
        return None
    return (f"/bin/{name}" if via_env else words[0]), Path(host)   # env finds /bin on init's PATH


def _shared_libraries(elf: Path, sandboxed: bool) -> dict[str, Path]:
    """The libraries and loader a dynamic executable needs, as ldd resolves them ("not a dynamic..." → none)."""
    # The program itself is bound in read-only: it may sit under the sandbox's private /tmp.
    argv = (sandbox.bwrap_prefix([], [elf]) if sandboxed else []) + ["ldd", str(elf)]
    proc = subprocess.run(argv, capture_output=True, text=True)
    found = {}
    for line in proc.stdout.splitlines():
        # "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
        path = line.split("=>")[-1].strip().split(" (")[0].strip()
        if path.startswith("/") and Path(path).exists():
            found[path] = Path(path)
    return found


def parse_tap(console: str) -> list[KselftestResult]:
    """Per-test results from run_kselftest.sh's TAP, between the guest's begin and end markers."""
    results = []
    inside = False
    for raw in console.splitlines():
        line = clean_line(raw).strip()
        if line == BEGIN:
            inside = True
        elif line == END:
            inside = False
        elif inside and (m := _TAP.match(line)):
            target, test = _split_name(m["name"])
            skipped = (m["directive"] or "").upper() == "SKIP"
            status = "skip" if skipped else "fail" if m["not"] else "pass"
            results.append(KselftestResult(target, test, status))
    return results


def _split_name(name: str) -> tuple[str, str]:
    # run_kselftest.sh names a test "selftests: TARGET: TEST"; other TAP producers just "TEST".
    parts = [p.strip() for p in name.split(": ")]
    if len(parts) == 3 and parts[0] == "selftests":
        return parts[1], parts[2]
    return "", name.strip()


def finished(console: str) -> bool:
    return any(clean_line(line).strip() == END for line in console.splitlines())
