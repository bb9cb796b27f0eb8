"""The README's bundled example, end to end through the installed command line."""

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "example"


def patchbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "patchbench", *args], capture_output=True, text=True)


def test_example_tree_matches_the_series_base(tmp_path):
    subprocess.run(["sh", str(EXAMPLE / "make-tree.sh"), str(tmp_path / "tree")], check=True)
    head = subprocess.run(["git", "-C", str(tmp_path / "tree"), "rev-parse", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    series = json.loads(patchbench("series", str(EXAMPLE / "series.mbox"), "--json").stdout)
    assert series["base_commit"] == head


def test_example_check_finds_the_planted_bug_on_patch_2_only(tmp_path):
    tree = tmp_path / "tree"
    subprocess.run(["sh", str(EXAMPLE / "make-tree.sh"), str(tree)], check=True)
    result = patchbench("check", str(EXAMPLE / "series.mbox"), "--tree", str(tree), "--format", "json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert [(f["rule"], f["patch"], f["function"]) for f in report["findings"]] == [
        ("ptr-ring-consume-unlocked", 2, "pbdemo_peek_len")]
    assert [p["new_findings"] for p in report["patches"]] == [0, 1]
    # the user's example checkout is untouched
    status = subprocess.run(["git", "-C", str(tree), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == ""


def test_demo_script_runs_as_the_readme_says():
    result = subprocess.run(["sh", str(EXAMPLE / "demo.sh")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "pbdemo_peek_len" in result.stdout
    assert "Reviewed-by: Bob Reviewer <bob@example.com>" in result.stdout
