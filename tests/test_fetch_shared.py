"""scripts/fetch-shared: the CI's copy of what the tests read from ../shared (the peer mail corpus
and patchwork's API description), file by file from pinned commits.

The manifest must describe what the tests read (every file, byte for byte), and the script must
place a served copy where the tests expect it, refusing a file whose content is not the pinned one;
the tests that read ../shared must pass from that copy alone. GitHub is out of reach here: a
loopback HTTP server serves the same paths.
"""

from __future__ import annotations

import functools
import http.server
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.shared import CORPUS, SHARED

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "fetch-shared"


def _manifest_entries() -> list[tuple[str, str, str, str, str]]:
    loader = importlib.machinery.SourceFileLoader("fetch_shared", str(SCRIPT))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("fetch_shared", loader))
    loader.exec_module(module)
    return module.entries()


def fetch(*args: str, url: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"PATCHBENCH_SHARED_URL": url} if url else {})}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=600)


def test_the_manifest_describes_what_the_tests_read(corpus, patchwork_spec):
    entries = _manifest_entries()
    on_disk = {str(p.relative_to(SHARED)) for folder in (CORPUS, patchwork_spec.parent) for p in folder.rglob("*")
               if p.is_file() and not p.name.endswith(".md")}   # .md: provenance notes
    assert {local for local, *_ in entries} == on_disk
    assert all(len(commit) == 40 for _, _, commit, _, _ in entries)
    checked = fetch("--check", str(SHARED))
    assert checked.returncode == 0, checked.stderr
    assert f"{len(entries)} of {len(entries)} pinned files in place" in checked.stdout


@pytest.fixture
def served(corpus, patchwork_spec, tmp_path):
    """../shared laid out as <repo>/<commit>/<path> (as GitHub serves raw files) on a loopback server."""
    upstream = tmp_path / "upstream"
    for local, repo, commit, path, _ in _manifest_entries():
        target = upstream / repo / commit / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SHARED / local, target)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(upstream))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield upstream, f"http://127.0.0.1:{server.server_port}/{{repo}}/{{commit}}/{{path}}"
    server.shutdown()


def test_fetch_places_every_file_and_refuses_a_changed_one(served, tmp_path):
    upstream, url = served
    dest = tmp_path / "shared"
    done = fetch(str(dest), url=url)
    assert done.returncode == 0, done.stderr
    assert fetch("--check", str(dest)).returncode == 0
    # a served file that is not the pinned content is refused and reported, the rest still placed
    local, repo, commit, path, _ = _manifest_entries()[0]
    (upstream / repo / commit / path).write_bytes(b"not the pinned file\n")
    other = tmp_path / "other"
    refused = fetch(str(other), url=url)
    assert refused.returncode == 1 and f"{local}: " in refused.stderr and "differs" in refused.stderr
    assert not (other / local).exists()
    assert fetch("--check", str(other)).returncode == 1


@pytest.mark.kernel
def test_the_tests_that_read_shared_pass_from_a_fetched_copy_alone(served, tmp_path):
    """With ../shared out of sight (PATCHBENCH_SHARED names a fetched copy), the corpus and the
    patchwork bot tests pass: nothing they read comes from anywhere else."""
    _, url = served
    dest = tmp_path / "fetched"
    assert fetch(str(dest), url=url).returncode == 0
    env = {**os.environ, "PATCHBENCH_SHARED": str(dest), "CI": "true"}   # CI: a skip would be a failure
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/test_corpus_expected.py", "tests/test_corpus_diffs.py",
                          "tests/test_corpus_oracles.py", "tests/test_series_threads.py", "tests/test_apply_b4.py",
                          "tests/test_bot.py::test_queue_gets_exactly_the_expected_checks",
                          "tests/test_bot.py::test_the_stand_in_catches_a_request_the_spec_forbids"],
                         cwd=root, env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and " skipped" not in run.stdout, run.stdout[-2000:]
