import os
import shutil
from pathlib import Path

import pytest

from tests.support import kernel
from tests.support.shared import CORPUS, PATCHWORK_SPEC

# What the summary prints: the kernel trees the run used, and real-bug cases whose code they lack.
TREES_USED = pytest.StashKey[dict]()
NOT_APPLICABLE = pytest.StashKey[dict]()


def missing(reason: str):
    """Skip for something this machine lacks; under CI=true a missing kernel or corpus is a failure."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must not skip: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The shared mail corpus (../shared/corpus); tests that need it skip where it is absent."""
    if not CORPUS.is_dir():
        missing(f"shared mail corpus not found at {CORPUS} (scripts/fetch-shared fetches it)")
    return CORPUS


@pytest.fixture(scope="session")
def patchwork_spec() -> Path:
    """patchwork's REST API description (../shared/specs), which the patchwork stand-in checks against."""
    if not PATCHWORK_SPEC.is_file():
        missing(f"patchwork API description not found at {PATCHWORK_SPEC} (scripts/fetch-shared fetches it)")
    return PATCHWORK_SPEC


def _kernel(name: str, config: pytest.Config) -> Path:
    try:
        tree = kernel.tree(name)
    except FileNotFoundError as exc:
        missing(str(exc))
    config.stash.setdefault(TREES_USED, {})[name] = tree
    return Path(tree.path)


@pytest.fixture(scope="session")
def kernel_tree(pytestconfig) -> Path:
    """A git repository of Debian's linux-source-6.1, whichever 6.1.y (one commit, tag debian-6.1), cached."""
    return _kernel("6.1", pytestconfig)


@pytest.fixture(scope="session")
def kernel_tree_new(pytestconfig) -> Path:
    """The newest kernel source Debian's unstable archive serves (tag debian-newest), fetched privately, cached."""
    return _kernel(kernel.NEWEST, pytestconfig)


def pytest_terminal_summary(terminalreporter, config):
    trees = config.stash.get(TREES_USED, {})
    if trees:
        terminalreporter.write_sep("-", "kernel sources")
        for name in sorted(trees):
            terminalreporter.write_line(trees[name].describe())
    skipped = config.stash.get(NOT_APPLICABLE, {})
    if skipped:
        terminalreporter.write_sep("-", f"real-bug cases not applicable: {len(skipped)}")
        for case_id in sorted(skipped):
            terminalreporter.write_line(f"{case_id}: {skipped[case_id]}")


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
