import os
import shutil
from pathlib import Path

import pytest

from tests.support import kernel

CORPUS = Path(os.environ.get("PATCHBENCH_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "corpus"))


def missing(reason: str):
    """Skip for something this machine lacks; under CI=true a missing kernel or corpus is a failure."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must not skip: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The shared mail corpus (../shared/corpus); tests that need it skip where it is absent."""
    if not CORPUS.is_dir():
        missing(f"shared mail corpus not found at {CORPUS}")
    return CORPUS


def _kernel(version: str) -> Path:
    try:
        return kernel.kernel_repo(version)
    except FileNotFoundError as exc:
        missing(str(exc))


@pytest.fixture(scope="session")
def kernel_tree() -> Path:
    """A git repository of Debian's linux-source-6.1 (one commit, tag v6.1-debian), cached between runs."""
    return _kernel("6.1")


@pytest.fixture(scope="session")
def kernel_tree_new() -> Path:
    """The newest kernel Debian has (linux-source-7.2, tag v7.2-debian), fetched privately, cached."""
    return _kernel(kernel.NEWEST)


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:   # .ci/run installs every tool the tests use: under CI its absence is a failure
        missing(f"{name} is not installed on this machine")
    return path


@pytest.fixture(scope="module")
def kernel_clone(kernel_tree: Path, tmp_path_factory) -> tuple[Path, str]:
    """A shared, checkout-less clone of the 6.1 tree (the cached tree stays untouched) and its base sha."""
    from tests.support.git_series import git

    repo = tmp_path_factory.mktemp("kernel-clone") / "linux"
    git(repo.parent, "clone", "-q", "--shared", "--no-checkout", str(kernel_tree), str(repo))
    return repo, git(repo, "rev-parse", kernel.TAG)


@pytest.fixture
def check_on_61(kernel_clone, tmp_path, capsys):
    """Mail patches (tests/support/ring_series.py shape) against 6.1 and `patchbench check` them.

    Returns a function: patches... -> (exit code, JSON report).
    """
    import json

    from patchbench.cli import main
    from tests.support.ring_series import make_series

    repo, base = kernel_clone

    def check(*patches) -> tuple[int, dict]:
        series = make_series(repo, base, list(patches), tmp_path / "series")
        code = main(["check", str(series), "--tree", str(repo), "--format", "json", "--checks", "rules"])
        return code, json.loads(capsys.readouterr().out)
    return check
