"""`patchbench worker --check`: a real redis-server, a tree served by file URL, and ones that are not there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import require_tool
from tests.support.farm import free_port, redis_server
from tests.support.git_series import commit_files, git

ROOT = Path(__file__).resolve().parents[1]


def _check(*args: str) -> tuple[int, list[str]]:
    proc = subprocess.run([sys.executable, "-m", "patchbench", "worker", "--check", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.stderr == ""
    return proc.returncode, proc.stdout.splitlines()


def test_worker_check_says_ready_and_names_what_is_missing(tmp_path):
    require_tool("redis-server")
    tree = tmp_path / "linux"
    tree.mkdir()
    git(tree, "init", "-q")
    git(tree, "update-ref", "refs/heads/main", commit_files(tree, None, {"Makefile": b"all:\n"}, "base"))
    with redis_server(tmp_path) as broker:
        code, lines = _check("--broker", broker, "--tree-url", tree.as_uri())
        names = [line.split(":")[0].split(None, 1)[1] for line in lines[:-1]]
        assert names == ["broker", "build tools", "boot tools", "accel", "disk", "tree"]
        assert lines[0].startswith(f"ok    broker: {broker} answers")
        assert lines[5] == f"ok    tree: {tree.as_uri()} answers (1 branches and tags)"
        assert lines[3].startswith(("ok    accel: kvm", "ok    accel: tcg"))
        build_tools_there = lines[1].startswith("ok")
        assert (code, lines[-1]) == ((0, "ready") if build_tools_there else (1, "not ready"))

        code, lines = _check("--broker", broker, "--tree-url", (tmp_path / "gone").as_uri())
        assert code == 1 and lines[-1] == "not ready"
        assert lines[5].startswith(f"FAIL  tree: {(tmp_path / 'gone').as_uri()}: ")

    code, lines = _check("--broker", f"redis://127.0.0.1:{free_port()}/0")
    assert code == 1 and lines[0].startswith("FAIL  broker: redis://127.0.0.1:") and lines[-1] == "not ready"
