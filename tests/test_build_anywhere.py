"""Builds work wherever the package is installed: the sandbox mounts a private /tmp, so a package (and
its netdev.config fragment) installed under /tmp, or a build cache kept there, must still be seen.

The package is copied to a directory under /tmp (outside the checkout) and run from there through
PYTHONPATH, as an install would be. One test configures a fresh build directory in a cache under
/tmp (the step that read the fragment from the package's path); one builds a planted series' touched
objects on the 6.1 tree in the usual, warm cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import require_tool
from tests.support import kernel
from tests.support.planted import plant

pytestmark = [pytest.mark.slow, pytest.mark.kernel]
CHECKOUT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed_under_tmp():
    for tool in ("make", "gcc", "ccache", "bwrap", "flex", "bison", "bc"):
        require_tool(tool)
    site = Path(tempfile.mkdtemp(prefix="patchbench-site-", dir="/tmp"))
    shutil.copytree(CHECKOUT / "patchbench", site / "patchbench", ignore=shutil.ignore_patterns("__pycache__"))
    yield site
    shutil.rmtree(site, ignore_errors=True)


def _from(site: Path, argv: list[str], cwd: Path, env: dict | None = None, timeout: float = 3600):
    """Run python with only the copy under /tmp importable (cwd outside the checkout)."""
    proc = subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(site), **(env or {})})
    return proc


CONFIGURE = """
import json, sys
from pathlib import Path
import patchbench
from patchbench.dispatch import workspace
from patchbench.dispatch.kbuild import Kbuild
from patchbench.dispatch.kconfig import NETDEV_FRAGMENT, KernelConfig
repo, base, cache = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
with workspace.hold_slot(repo, "configure-under-tmp", cache) as slot:
    slot.checkout(base)
    failed, check = Kbuild(slot).configure(KernelConfig.netdev(), log=cache / "configure.log", timeout=3000)
    dotconfig = (slot.obj / ".config").read_text()
    print(json.dumps({"package": patchbench.__file__, "fragment": str(NETDEV_FRAGMENT),
                      "failed": failed.output[-3000:] if failed else None, "missing": check.missing,
                      "tun": "CONFIG_TUN=y" in dotconfig}))
"""


def test_a_fresh_build_directory_is_configured_from_a_package_and_cache_under_tmp(installed_under_tmp, kernel_tree):
    cache = Path(tempfile.mkdtemp(prefix="patchbench-cache-", dir="/tmp"))
    try:
        proc = _from(installed_under_tmp, ["-c", CONFIGURE, str(kernel_tree), kernel.base_commit(kernel_tree),
                                           str(cache)], cwd=cache)
        assert proc.returncode == 0, proc.stderr[-3000:]
        result = json.loads(proc.stdout)
        assert result["package"].startswith(str(installed_under_tmp))
        assert result["fragment"].startswith("/tmp/")
        assert result["failed"] is None, result["failed"]
        assert result["missing"] == {} and result["tun"]    # the netdev fragment was merged
    finally:
        subprocess.run(["git", "-C", str(kernel_tree), "worktree", "remove", "--force",
                        str(cache / "builds" / "configure-under-tmp" / "slot-0" / "src")], capture_output=True)
        shutil.rmtree(cache, ignore_errors=True)


def test_touched_objects_build_from_a_package_under_tmp(installed_under_tmp, kernel_tree, tmp_path):
    base = kernel.base_commit(kernel_tree)
    head, commits = plant(kernel_tree, "warning-series", base)
    proc = _from(installed_under_tmp, ["-m", "patchbench", "build", f"{base}..{head}", "--tree", str(kernel_tree),
                                       "--results", str(tmp_path / "results.sqlite"), "--format", "json"],
                 cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]      # patch 1 adds a warning: found, so exit 1
    jobs = json.loads(proc.stdout)["jobs"]
    assert [j["commit"] for j in jobs] == commits
    assert [j["status"] for j in jobs] == ["fail", "fail", "pass"], [j.get("reason") for j in jobs]
    assert [(w["function"], w["flag"]) for w in jobs[0]["new_warnings"]] == [("tun_chr_open", "-Wunused-variable")]
    assert jobs[2]["objects"] == ["drivers/net/tun.o"]
