"""The guest exercises a series gets, chosen from the exercises table (exercises.toml) by the paths
it touches, as files for the initramfs: the statically compiled programs and the list of run lines."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from patchbench.dispatch.kselftest import GuestFile
from patchbench.errors import BadInput

TABLE = Path(__file__).with_name("exercises.toml")
GUEST = Path(__file__).with_name("guest")
EXERCISES_FILE = "patchbench/exercises"    # in the guest: one "name<TAB>command" line per exercise


@dataclass(frozen=True)
class Exercise:
    name: str
    about: str
    touches: tuple[str, ...]
    run: str
    program: str | None = None             # a C source in guest/

    def wanted_by(self, paths: list[str]) -> bool:
        return any(path == t or (t.endswith("/") and path.startswith(t)) for path in paths for t in self.touches)


@cache
def table() -> tuple[Exercise, ...]:
    data = tomllib.loads(TABLE.read_text())
    return tuple(Exercise(e["name"], " ".join(e["about"].split()), tuple(e["touches"]), e["run"], e.get("program"))
                 for e in data["exercise"])


def chosen(paths: list[str]) -> list[Exercise]:
    return [e for e in table() if e.wanted_by(paths)]


def guest_files(exercises: list[Exercise], cache_dir: Path) -> list[GuestFile]:
    """The run list and each program, compiled once per source (and shared header) text into the cache."""
    files = [GuestFile(EXERCISES_FILE, 0o100644, "".join(f"{e.name}\t{e.run}\n" for e in exercises).encode())]
    for e in exercises:
        if e.program:
            files.append(GuestFile(f"bin/{Path(e.program).stem}", 0o100755, _compiled(GUEST / e.program, cache_dir)))
    return files


def _compiled(source: Path, cache_dir: Path) -> bytes:
    material = hashlib.sha256(source.read_bytes())
    for header in sorted(GUEST.glob("*.h")):   # the programs' shared header
        material.update(header.read_bytes())
    out = cache_dir / "guest-programs" / f"{source.stem}-{material.hexdigest()[:16]}"
    if not out.exists():
        if shutil.which("gcc") is None:
            raise BadInput(f"gcc is needed to build the guest program {source.name}")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        done = subprocess.run(["gcc", "-static", "-O2", "-o", str(tmp), str(source)], capture_output=True, text=True)
        if done.returncode != 0:
            raise BadInput(f"the guest program {source.name} does not compile: {done.stderr.strip()[-300:]}")
        tmp.rename(out)
    return out.read_bytes()
