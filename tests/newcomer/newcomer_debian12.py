"""The README's first command on a fresh Debian 12 (a debootstrap chroot): it installs and runs the
bundled example. Several minutes and network access (deb.debian.org, PyPI), root: not collected by
the normal run (the file name does not start with test_); run it on purpose with

    sudo python3 -m pytest -q tests/newcomer/newcomer_debian12.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().with_name("debian12.sh")


def _remove_chroot(root: Path) -> None:
    """Delete the chroot, but never through a mount the script left behind (its /dev is the host's)."""
    for mount in ("proc", "dev"):
        subprocess.run(["umount", str(root / mount)], capture_output=True)
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    if not any(m == str(root) or m.startswith(f"{root}/") for m in mounts):
        shutil.rmtree(root, ignore_errors=True)
    for kept in (f"{root}.log", f"{root}.out"):
        Path(kept).unlink(missing_ok=True)


@pytest.mark.slow
def test_readme_first_command_runs_the_example_on_a_fresh_debian_12(tmp_path):
    assert os.geteuid() == 0, "debootstrap and chroot need root"
    assert shutil.which("debootstrap"), "apt-get install debootstrap"
    root = Path("/var/tmp") / f"patchbench-newcomer-{os.getpid()}"
    try:
        done = subprocess.run(["sh", str(SCRIPT), str(root)], capture_output=True, text=True, timeout=1800)
    finally:
        _remove_chroot(root)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "OK: the README's first command works on a fresh Debian 12" in done.stdout
