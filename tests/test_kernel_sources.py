"""The suite's kernel trees are found by content: whichever point release is at hand, a tree records
the version its own Makefile states, a real-bug case whose code the tree lacks is not applicable
(with its reason and that version) rather than failed, and scripts/check-kernel-sources says in one
line when too few cases apply. Exercised on small tarballs of our own writing standing in for a
Debian kernel source (the override variables a user would set for a locally built package)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.support import kernel, realbugs
from tests.support.git_series import git

ROOT = Path(__file__).resolve().parents[1]
MAKEFILE = "# SPDX-License-Identifier: GPL-2.0\nVERSION = {v}\nPATCHLEVEL = {p}\nSUBLEVEL = {s}\nEXTRAVERSION =\nNAME = Test\n"
DRIVER = """static int wren_open(struct wren *w)
{
\tspin_lock(&w->lock);
\tw->open = 1;
\tspin_unlock(&w->lock);
\treturn 0;
}
"""


def tarball(where: Path, version: str, files: dict[str, str]) -> Path:
    """A kernel-source-shaped tarball: one top directory holding a Makefile of `version` and `files`."""
    v, p, s = version.split(".")
    top = where / f"src-{version}" / "linux-source"
    for path, text in {"Makefile": MAKEFILE.format(v=v, p=p, s=s), **files}.items():
        (top / path).parent.mkdir(parents=True, exist_ok=True)
        (top / path).write_text(text)
    out = where / f"linux-source-{version}.tar"
    with tarfile.open(out, "w") as tar:
        tar.add(top, arcname="linux-source")
    return out


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setattr(kernel, "CACHE", tmp_path / "cache")
    return tmp_path / "cache"


def case(function: str, file: str = "drivers/net/wren.c") -> realbugs.Case:
    return realbugs.Case(id=f"wren-{function}", rule="lock-imbalance", kernel="6.1", subject="s", seen="ours",
                         file=file, function=function,
                         edits=(realbugs.Edit(op="delete", line=r"spin_unlock\(&w->lock\)"),))


def test_the_version_comes_from_the_makefile():
    assert kernel.linux_version(MAKEFILE.format(v=6, p=1, s=192)) == "6.1.192"
    assert kernel.linux_version("VERSION = 7\nPATCHLEVEL = 3\nSUBLEVEL = 0\nEXTRAVERSION = -rc2\n") == "7.3.0-rc2"
    with pytest.raises(ValueError):
        kernel.linux_version("all:\n\techo not a kernel\n")


def test_a_tree_is_keyed_by_content_and_a_new_release_replaces_the_old(cache, tmp_path, monkeypatch):
    first = tarball(tmp_path, "6.1.500", {"drivers/net/wren.c": DRIVER})
    monkeypatch.setenv("PATCHBENCH_KERNEL_6_1", str(first))
    old = kernel.tree("6.1")
    assert old.linux == "6.1.500" and old.source.origin == "$PATCHBENCH_KERNEL_6_1"
    assert git(Path(old.path), "rev-parse", kernel.TAG) == old.base
    assert kernel.tree("6.1") == old   # reused, not rebuilt
    second = tarball(tmp_path, "6.1.501", {"drivers/net/wren.c": DRIVER.replace("open = 1", "open = 2")})
    monkeypatch.setenv("PATCHBENCH_KERNEL_6_1", str(second))
    new = kernel.tree("6.1")
    assert new.linux == "6.1.501" and new.path != old.path and new.base != old.base
    assert not Path(old.path).exists()   # an older point release's tree is not kept
    assert "6.1: Linux 6.1.501" in new.describe()


def test_a_case_whose_code_is_absent_is_not_applicable_with_reason_and_version(cache, tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHBENCH_KERNEL_6_1", str(tarball(tmp_path, "6.1.777", {"drivers/net/wren.c": DRIVER})))
    (tmp_path / "work").mkdir()
    bench = realbugs.Bench(tmp_path / "work", {"6.1": kernel.kernel_repo("6.1")})
    assert bench.not_applicable(case("wren_open")) is None
    assert bench.not_applicable(case("wren_close")) == (
        "drivers/net/wren.c: function wren_close is defined 0 times in Linux 6.1.777")
    assert bench.not_applicable(case("wren_open", "drivers/net/gone.c")) == "no drivers/net/gone.c in Linux 6.1.777"
    outcomes = [bench.outcome(case("wren_close")), bench.outcome(case("wren_open", "drivers/net/gone.c"))]
    assert all(o.not_applicable and not o.caught and o.error is None for o in outcomes)
    assert realbugs.recall(outcomes) == (0, 0)   # counted in no rate


def test_the_canary_says_in_one_line_when_the_benchmark_stopped_applying(tmp_path):
    """Trees of a release none of the recorded cases fits: exit 1, one line per kernel and set naming it."""
    env = {**os.environ, "PATCHBENCH_TEST_CACHE": str(tmp_path / "cache"),
           "PATCHBENCH_KERNEL_6_1": str(tarball(tmp_path, "6.1.900", {"drivers/net/wren.c": DRIVER})),
           "PATCHBENCH_KERNEL_NEWEST": str(tarball(tmp_path, "9.9.1", {"drivers/net/wren.c": DRIVER}))}
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "check-kernel-sources"), "--offline"],
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout + run.stderr
    verdicts = [line for line in run.stdout.splitlines() if line.startswith("check-kernel-sources: ")]
    assert len(verdicts) == 3, run.stdout
    assert "6.1 cases apply to Linux 6.1.900" in verdicts[0] and "newest cases apply to Linux 9.9.1" in verdicts[1]
    assert "newest validation cases apply to Linux 9.9.1" in verdicts[2]
    assert "Traceback" not in run.stderr
