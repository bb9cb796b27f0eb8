"""Every command, given bad input: one line on stderr starting `patchbench: error:`, exit 2, no
traceback, and no file created anywhere (not in the working directory, the cache, the tree or next
to the input)."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.thread_cases import posting

ROOT = Path(__file__).resolve().parents[1]
SERIES = b"".join(b"From mboxrd@z Thu Jan  1 00:00:00 1970\n" + m + b"\n" for m in posting("bad", 1, 0))

# (id, argv with {placeholders} for the paths of the `place` fixture)
CASES = [
    # series
    ("series-missing-file", ["series", "{absent}"]),
    ("series-empty-directory", ["series", "{empty_dir}"]),
    ("series-garbage-mbox", ["series", "{garbage}"]),
    ("series-unreadable-file", ["series", "{socket}"]),
    ("series-bad-version-flag", ["series", "{series}", "--version", "two"]),
    ("series-unknown-flag", ["series", "{series}", "--frobnicate"]),
    ("series-version-not-there", ["series", "{series}", "--version", "7"]),
    # apply
    ("apply-missing-file", ["apply", "{absent}", "--tree", "{repo}"]),
    ("apply-missing-tree", ["apply", "{series}", "--tree", "{absent}"]),
    ("apply-directory-as-source", ["apply", "{empty_dir}", "--tree", "{repo}"]),
    ("apply-file-as-tree", ["apply", "{series}", "--tree", "{series}"]),
    ("apply-non-git-tree", ["apply", "{series}", "--tree", "{notgit}"]),
    ("apply-garbage-mbox", ["apply", "{garbage}", "--tree", "{repo}"]),
    ("apply-unreadable-file", ["apply", "{socket}", "--tree", "{repo}"]),
    ("apply-bad-base", ["apply", "{series}", "--tree", "{repo}", "--base", "no-such-rev"]),
    ("apply-bad-flag", ["apply", "{series}", "--tree", "{repo}", "--version", "x"]),
    # check
    ("check-missing-file", ["check", "{absent}", "--tree", "{repo}"]),
    ("check-non-git-tree", ["check", "{series}", "--tree", "{notgit}"]),
    ("check-garbage-mbox", ["check", "{garbage}", "--tree", "{repo}"]),
    ("check-bad-format", ["check", "{series}", "--tree", "{repo}", "--format", "xml"]),
    # lint
    ("lint-missing-file", ["lint", "{absent}"]),
    ("lint-unreadable-file", ["lint", "{socket}"]),
    ("lint-bad-jobs", ["lint", "{notgit}", "-j", "many"]),
    ("lint-no-path", ["lint"]),
    # run
    ("run-missing-file", ["run", "{absent}", "--tree", "{repo}"]),
    ("run-non-git-tree", ["run", "{series}", "--tree", "{notgit}", "--build"]),
    ("run-garbage-mbox", ["run", "{garbage}", "--tree", "{repo}", "--build"]),
    ("run-kselftest-without-boot", ["run", "{series}", "--tree", "{repo}", "--kselftest", "net"]),
    # build
    ("build-missing-file", ["build", "{absent}", "--tree", "{repo}"]),
    ("build-non-git-tree", ["build", "{series}", "--tree", "{notgit}"]),
    ("build-garbage-mbox", ["build", "{garbage}", "--tree", "{repo}"]),
    ("build-missing-config-fragment", ["build", "{series}", "--tree", "{repo}", "--config", "{absent}"]),
    ("build-bad-timeout", ["build", "{series}", "--tree", "{repo}", "--build-timeout", "soon"]),
    # boot
    ("boot-missing-file", ["boot", "{absent}", "--tree", "{repo}"]),
    ("boot-non-git-tree", ["boot", "{series}", "--tree", "{notgit}"]),
    ("boot-unreadable-file", ["boot", "{socket}", "--tree", "{repo}"]),
    # results
    ("results-db-missing", ["results", "--db", "{absent_db}"]),
    ("results-db-not-a-database", ["results", "--db", "{garbage}"]),
    ("results-db-other-sqlite", ["results", "--db", "{other_sqlite}"]),
    ("results-db-directory", ["results", "--db", "{empty_dir}"]),
    ("results-db-unreadable", ["results", "--db", "{socket}"]),
    ("results-bad-limit", ["results", "--limit", "lots"]),
    ("build-results-not-a-database", ["build", "{series}", "--tree", "{repo}", "--results", "{garbage}",
                                      "--config", "{absent}"]),
]


@pytest.fixture
def place(tmp_path: Path) -> dict[str, Path]:
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@example.org", *args],
                       check=True)
    (tmp_path / "notgit").mkdir()
    (tmp_path / "notgit" / "README").write_text("not a repository\n")
    (tmp_path / "empty").mkdir()
    garbage = tmp_path / "garbage.mbox"
    garbage.write_bytes(bytes(range(256)) * 64)
    series = tmp_path / "series.mbox"
    series.write_bytes(SERIES)
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    # a socket cannot be opened for reading, not even by root: the unreadable file of this test
    unreadable = tmp_path / "unreadable.mbox"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(unreadable))
    listener.close()
    (tmp_path / "home").mkdir()
    return {"repo": repo, "notgit": tmp_path / "notgit", "empty_dir": tmp_path / "empty", "garbage": garbage,
            "series": series, "other_sqlite": other, "socket": unreadable, "absent": tmp_path / "absent.mbox",
            "absent_db": tmp_path / "no" / "such" / "results.sqlite", "home": tmp_path / "home"}


def _snapshot(root: Path) -> set[tuple[str, int]]:
    return {(str(p.relative_to(root)), p.stat().st_mtime_ns if not p.is_dir() else 0)
            for p in root.rglob("*") if not p.is_socket()}


@pytest.mark.parametrize("argv", [argv for _, argv in CASES], ids=[name for name, _ in CASES])
def test_bad_input_is_one_line_exit_2_and_creates_nothing(place, tmp_path, argv):
    args = [arg.format(**{k: str(v) for k, v in place.items()}) for arg in argv]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATCHBENCH_", "XDG_"))}
    env.update(HOME=str(place["home"]), PYTHONPATH=str(ROOT))
    before = _snapshot(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "patchbench", *args], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith("patchbench: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert _snapshot(tmp_path) == before


def _results(place, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATCHBENCH_", "XDG_"))}
    env.update(HOME=str(place["home"]), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "patchbench", "results", *args], capture_output=True, text=True,
                          cwd=place["home"], env=env, timeout=60)


def test_results_before_any_job_shows_nothing_and_creates_nothing(place):
    proc = _results(place, "--format", "json")
    assert (proc.returncode, proc.stdout.strip(), proc.stderr) == (0, "[]", "")
    assert list(place["home"].iterdir()) == []


def test_results_reads_a_database_the_jobs_wrote(place):
    from patchbench.dispatch.jobs import JobResult
    from patchbench.dispatch.store import ResultStore

    db = place["home"] / "mine.sqlite"
    store = ResultStore(db)
    store.add("run-1", place["repo"], JobResult("build", 1, "a" * 40, "pass", 1.5, scope="objects"))
    store.close()
    proc = _results(place, "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert "run-1 build  patch 1  aaaaaaaaaaaa pass" in proc.stdout
