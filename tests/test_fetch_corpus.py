"""scripts/fetch-corpus: the CI's copy of the peer corpus, file by file from pinned commits.

The manifest must describe the corpus the tests read (every file, byte for byte), and the script
must place a served copy where the tests expect it, refusing a file whose content is not the
pinned one. GitHub is out of reach here: a loopback HTTP server serves the same paths.
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

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "fetch-corpus"


def _manifest_entries() -> list[tuple[str, str, str, str, str]]:
    loader = importlib.machinery.SourceFileLoader("fetch_corpus", str(SCRIPT))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("fetch_corpus", loader))
    loader.exec_module(module)
    return module.entries()


def fetch(*args: str, url: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"PATCHBENCH_CORPUS_URL": url} if url else {})}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=600)


def test_the_manifest_describes_the_corpus_the_tests_read(corpus):
    entries = _manifest_entries()
    on_disk = {str(p.relative_to(corpus)) for p in corpus.rglob("*")
               if p.is_file() and not p.name.endswith(".md")}   # .md: our own provenance notes
    assert {local for local, *_ in entries} == on_disk
    assert all(len(commit) == 40 for _, _, commit, _, _ in entries)
    checked = fetch("--check", str(corpus))
    assert checked.returncode == 0, checked.stderr
    assert f"{len(entries)} of {len(entries)} corpus files in place" in checked.stdout


@pytest.fixture
def served(corpus, tmp_path):
    """The corpus laid out as <repo>/<commit>/<path> (as GitHub serves raw files) on a loopback server."""
    upstream = tmp_path / "upstream"
    for local, repo, commit, path, _ in _manifest_entries():
        target = upstream / repo / commit / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(corpus / local, target)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(upstream))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield upstream, f"http://127.0.0.1:{server.server_port}/{{repo}}/{{commit}}/{{path}}"
    server.shutdown()


def test_fetch_places_every_file_and_refuses_a_changed_one(served, tmp_path):
    upstream, url = served
    dest = tmp_path / "corpus"
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
