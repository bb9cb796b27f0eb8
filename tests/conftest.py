import os
import shutil
from pathlib import Path

import pytest

from tests.support import kernel

CORPUS = Path(os.environ.get("PATCHBENCH_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "corpus"))


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The shared mail corpus (../shared/corpus); tests that need it skip where it is absent."""
    if not CORPUS.is_dir():
        pytest.skip(f"shared mail corpus not found at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def kernel_tree() -> Path:
    """A git repository of Debian's linux-source-6.1 (one commit, tag v6.1-debian), cached between runs."""
    try:
        return kernel.kernel_repo()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed on this machine")
    return path
