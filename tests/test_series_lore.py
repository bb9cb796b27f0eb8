"""Threads fetched by Message-Id or archive URL, from a real HTTP server laid out like lore."""

from __future__ import annotations

import gzip
import shutil
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from patchbench.errors import BadInput
from patchbench.mail.lore import LORE_URL_ENV
from patchbench.series import load_series

NETDEV = Path(__file__).resolve().parents[1] / "fixtures" / "mail" / "netdev-v1-v2.mbox"


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture
def archive(tmp_path):
    """An HTTP server with the fixture thread at /all/<msgid>/t.mbox.gz and /netdev/<msgid>/t.mbox.gz."""
    for inbox in ("all", "netdev"):
        thread = tmp_path / inbox / "v2-0@example.org"
        thread.mkdir(parents=True)
        (thread / "t.mbox.gz").write_bytes(gzip.compress(NETDEV.read_bytes()))
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(tmp_path)))
    worker = threading.Thread(target=server.serve_forever, daemon=True)
    worker.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("message_id", ["<v2-0@example.org>", "v2-0@example.org"])
def test_thread_by_message_id(archive, monkeypatch, message_id):
    monkeypatch.setenv(LORE_URL_ENV, f"{archive}/all")
    series = load_series(message_id)
    assert series.version == 2 and series.cover.message_id == "v2-0@example.org"
    assert [p.index for p in series.patches] == [1, 2] and series.other_versions == [1]


def test_thread_by_archive_url(archive):
    series = load_series(f"{archive}/netdev/v2-0@example.org/T/#t")
    assert series.version == 2 and series.tree == "net-next"


def test_unknown_thread_is_bad_input(archive, monkeypatch):
    monkeypatch.setenv(LORE_URL_ENV, f"{archive}/all")
    with pytest.raises(BadInput, match="404"):
        load_series("<nobody@example.org>")
    with pytest.raises(BadInput, match="no Message-Id"):
        load_series(f"{archive}/netdev/")


def test_unreachable_archive_is_bad_input(monkeypatch):
    monkeypatch.setenv(LORE_URL_ENV, "http://127.0.0.1:9/all")   # the discard port: nothing listens
    with pytest.raises(BadInput, match="cannot fetch"):
        load_series("<v2-0@example.org>")


def test_local_file_wins_over_message_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(NETDEV, tmp_path / "v2@example.org")   # a file whose name looks like a Message-Id
    monkeypatch.setenv(LORE_URL_ENV, "http://127.0.0.1:9/all")
    assert load_series("v2@example.org").version == 2
