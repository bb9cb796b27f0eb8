"""A fixture kernel tree copied for one test, with the call-index and facts caches of its own."""

from __future__ import annotations

import shutil
from pathlib import Path


def isolated_copy(source: Path, tmp_path: Path, monkeypatch) -> Path:
    """Copy `source` to tmp_path/linux and point both caches into tmp_path: an index or facts
    cached by another test can never answer for this one."""
    monkeypatch.setenv("PATCHBENCH_INDEX_CACHE", str(tmp_path / "index"))
    monkeypatch.setenv("PATCHBENCH_CACHE", str(tmp_path / "cache"))
    copy = tmp_path / "linux"
    shutil.copytree(source, copy)
    return copy
