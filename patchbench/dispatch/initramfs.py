"""Our own small guest: Debian's static busybox, a static tun helper, an init script and the kselftests
a boot job names, as a gzipped cpio.

Chosen over virtme-ng because it needs nothing on the host beyond busybox-static and gcc (virtme-ng
needs udev and a 9p root), boots in about 2 s under TCG, and the whole guest is ours to read.
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
import struct
import subprocess
from pathlib import Path, PurePosixPath

from patchbench.dispatch.kselftest import GuestFile
from patchbench.errors import BadInput

GUEST = Path(__file__).with_name("guest")
BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox")
PT_INTERP = 3


def _is_static_elf(path: Path) -> bool:
    """An ELF64 executable without a PT_INTERP program header needs no dynamic loader in the guest."""
    data = path.read_bytes()
    if data[:5] != b"\x7fELF\x02":
        return False
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    return all(struct.unpack_from("<I", data, phoff + i * phentsize)[0] != PT_INTERP for i in range(phnum))


def _static_busybox() -> Path:
    for candidate in BUSYBOX_CANDIDATES:
        path = Path(candidate)
        if path.is_file() and _is_static_elf(path):
            return path
    raise BadInput("a statically linked busybox is needed for the boot guest (apt-get install busybox-static)")


def _newc(name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0), ino: int = 0) -> bytes:
    fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(name) + 1, 0]
    header = b"070701" + b"".join(b"%08X" % f for f in fields)
    pad = lambda n: b"\0" * (-n % 4)  # noqa: E731  (newc aligns header+name and data to 4 bytes)
    entry = header + name.encode() + b"\0"
    return entry + pad(len(entry)) + data + pad(len(data))


def build(cache: Path, extra: list[GuestFile] = ()) -> Path:
    """The initramfs for boot jobs, rebuilt only when busybox, the helper, init or the extra files change."""
    busybox = _static_busybox()
    helper_src = GUEST / "tun_echo.c"
    init = (GUEST / "init.sh").read_bytes()
    material = hashlib.sha256(busybox.read_bytes() + helper_src.read_bytes() + init)
    for f in extra:
        material.update(f"{f.name}\0{f.mode}\0{len(f.data)}\0".encode() + f.data)
    digest = material.hexdigest()[:16]
    out = cache / "initramfs" / f"{digest}.cpio.gz"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    helper = out.with_suffix(".tun_echo")
    if shutil.which("gcc") is None:
        raise BadInput("gcc is needed to build the boot guest's tun helper")
    subprocess.run(["gcc", "-static", "-O2", "-o", str(helper), str(helper_src)], check=True,
                   capture_output=True)
    files = [(d, 0o40755, b"", (0, 0)) for d in ("bin", "dev", "dev/net", "proc", "sys", "tmp", "sbin",
                                                  "usr", "usr/bin", "usr/sbin")]
    files += [
        ("dev/console", 0o20600, b"", (5, 1)),
        ("bin/busybox", 0o100755, busybox.read_bytes(), (0, 0)),
        ("bin/sh", 0o120777, b"busybox", (0, 0)),
        ("bin/tun_echo", 0o100755, helper.read_bytes(), (0, 0)),
        ("init", 0o100755, init, (0, 0)),
    ]
    present = {name for name, *_ in files}
    for f in extra:
        parents = [str(p) for p in reversed(PurePosixPath(f.name).parents) if str(p) not in (".", *present)]
        present.update(parents)
        files += [(d, 0o40755, b"", (0, 0)) for d in parents] + [(f.name, f.mode, f.data, (0, 0))]
    archive = b"".join(_newc(name, mode, data, rdev, ino) for ino, (name, mode, data, rdev)
                       in enumerate(files, start=1)) + _newc("TRAILER!!!", 0)
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(gzip.compress(archive, compresslevel=6))
    tmp.rename(out)
    helper.unlink()
    return out
