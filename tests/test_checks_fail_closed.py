"""The checker fails closed: a rule that raises, or an install without its queries, is an error
(exit 2, one line naming what failed), never a run that reports nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from patchbench.checks.engine import registry
from patchbench.cli import main

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "fixtures" / "checks" / "ptr_ring" / "produce_bugs.c"
OTHER = ROOT / "fixtures" / "checks" / "lock" / "imbalance_correct.c"   # no ptr_ring in it


def _broken_check(model):
    raise ValueError("injected failure")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_rule_that_raises_is_an_error_naming_rule_and_file(monkeypatch, capsys, tmp_path, jobs):
    monkeypatch.setenv("PATCHBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(registry.rule("ptr-ring-produce-unlocked"), "check", _broken_check)
    code = main(["lint", "--jobs", jobs, "--format", "terse", str(OTHER), str(PLANTED)])
    out, err = capsys.readouterr()
    assert code == 2
    assert err.strip().splitlines() == [
        f"patchbench: error: rule ptr-ring-produce-unlocked raised on {PLANTED}: ValueError: injected failure"]
    assert "Traceback" not in err and out == ""


def test_a_failed_rule_leaves_no_cached_answer(monkeypatch, capsys, tmp_path):
    """The failing run must not cache "no findings" for the file: the next good run finds the bug."""
    monkeypatch.setenv("PATCHBENCH_CACHE", str(tmp_path / "cache"))
    with monkeypatch.context() as patch:
        patch.setattr(registry.rule("ptr-ring-produce-unlocked"), "check", _broken_check)
        assert main(["lint", "--jobs", "1", str(PLANTED)]) == 2
    capsys.readouterr()
    assert main(["lint", "--jobs", "1", "--format", "terse", str(PLANTED)]) == 1
    assert "ptr-ring-produce-unlocked" in capsys.readouterr().out


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The python of a fresh venv with patchbench installed from a wheel built from this checkout.

    The dependencies (tree-sitter, GitPython, ...) are those of the environment running the tests,
    named in a .pth file as plain directories (so the .pth files in them, such as an editable
    install of patchbench, are not run); patchbench itself comes from the wheel, which sits earlier
    on sys.path. The build runs on a copy: it leaves build/ behind."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", source)
    for name in ("patchbench", "queries"):
        shutil.copytree(ROOT / name, source / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "dist"),
                            str(source)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    wheel = next((work / "dist").glob("patchbench-*.whl"))
    # No pip of its own (Debian's python3 needs python3-venv for that): this environment's pip
    # installs the wheel into the venv's site-packages.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(work / "venv")], check=True, timeout=300)
    python = work / "venv" / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    ours = dict.fromkeys(sysconfig.get_path(kind) for kind in ("purelib", "platlib"))
    (site / "test-dependencies.pth").write_text("".join(f"{path}\n" for path in ours))
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                              str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr
    return python


def _run_installed(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """python -m patchbench ARGS outside the checkout, with no PYTHONPATH leading back to it."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "PATCHBENCH_CACHE": str(cwd / "cache")}
    return subprocess.run([str(python), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def _installed_package(python: Path, cwd: Path) -> Path:
    where = _run_installed(python, "-c", "import patchbench; print(patchbench.__file__)", cwd=cwd)
    package = Path(where.stdout.strip()).parent
    assert package.is_relative_to(python.parents[1]), where.stdout + where.stderr   # the venv's copy
    return package


def test_installed_wheel_lints_with_its_own_queries(installed: Path, tmp_path):
    assert sorted(p.name for p in (_installed_package(installed, tmp_path) / "queries").glob("*.scm")) == \
        sorted(p.name for p in (ROOT / "queries").glob("*.scm"))
    shutil.copy2(PLANTED, tmp_path / "planted.c")
    proc = _run_installed(installed, "-m", "patchbench", "lint", "--format", "terse", "planted.c", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "planted.c:12: error: ptr-ring-produce-unlocked: __ptr_ring_produce(p->ring)" in proc.stdout


def test_installed_wheel_without_its_queries_is_an_error(installed: Path, tmp_path):
    package = _installed_package(installed, tmp_path)
    moved = tmp_path / "queries-moved"
    shutil.move(package / "queries", moved)
    try:
        shutil.copy2(PLANTED, tmp_path / "planted.c")
        proc = _run_installed(installed, "-m", "patchbench", "lint", "--jobs", "1", "planted.c", cwd=tmp_path)
    finally:
        shutil.move(moved, package / "queries")
    assert proc.returncode == 2
    assert proc.stderr == f"patchbench: error: the checker's queries are missing: no *.scm in {package / 'queries'}\n"
    assert "Traceback" not in proc.stderr and proc.stdout == ""
