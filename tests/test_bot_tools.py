"""The stand-in patchwork speaks the real API (git-pw and pwclient from PyPI run against it), and a
result page reads in a real headless Chromium (screenshot kept in the test output)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import missing
from tests.support.bot_queue import LIST_ID, PROJECT, build_queue, positions
from tests.support.patchwork_server import TOKEN, PatchworkServer

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = Path(os.environ.get("PATCHBENCH_TEST_OUTPUT", ROOT / "test-output"))


@pytest.fixture(autouse=True, scope="module")
def _spec(patchwork_spec):
    """The stand-in checks every request and answer against patchwork's API description."""


@pytest.fixture(scope="module")
def mails(kernel_clone, tmp_path_factory):
    repo, base = kernel_clone
    return build_queue(repo, base, tmp_path_factory.mktemp("mails")), repo, base


def _tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        missing(f"{name} is not installed (pip install git-pw pwclient)")
    return found


def test_git_pw_and_pwclient_read_and_write_through_the_stand_in(mails, tmp_path):
    queue, repo, _ = mails
    env = {**os.environ, "HOME": str(tmp_path), "PWCLIENTRC": str(tmp_path / "pwclientrc")}
    with PatchworkServer() as pw:
        pw.add_project(PROJECT, LIST_ID)
        series = pw.add_series(PROJECT, *queue["buggy"][:1])
        patch = series["patches"][1]
        git_pw = [_tool("git-pw"), "--server", f"{pw.url}/api/1.3", "--project", PROJECT, "--token", TOKEN]

        def run(argv, cwd=tmp_path):
            result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
            assert result.returncode == 0, (argv, result.stdout, result.stderr)
            return result.stdout

        listing = run(git_pw + ["series", "list", "--format", "csv"])
        assert str(series["id"]) in listing and "take the ptr_ring consumer lock" in listing
        shown = run(git_pw + ["series", "show", str(series["id"]), "--format", "csv"])
        assert "tap: add tap_ring_consume()" in shown
        run(git_pw + ["series", "download", str(series["id"]), str(tmp_path / "series.mbox")])
        assert (tmp_path / "series.mbox").read_text().count("Subject: [PATCH net-next") == 2
        patches = run(git_pw + ["patch", "list", "--format", "csv"])
        assert str(patch["id"]) in patches

        (tmp_path / "pwclientrc").write_text(
            f"[options]\ndefault = {PROJECT}\n\n[{PROJECT}]\nbackend = rest\nurl = {pw.url}/api/1.3\n"
            f"token = {TOKEN}\n")
        pwclient = _tool("pwclient")
        assert PROJECT in run([pwclient, "projects"])
        run([pwclient, "check-create", "-c", "pwclient-ci", "-s", "warning", "-d", "from pwclient",
             "-u", "http://127.0.0.1/x", str(patch["id"])])
        checks = run([pwclient, "check-list", str(patch["id"])])
        assert "pwclient-ci" in checks and "warning" in checks
        assert "tap_ring_consume" in run([pwclient, "view", str(patch["id"])])
        events = run([pwclient, "event-list"])
        assert "series-completed" in events
        # and the bot's own request shapes agree with what the tools were served
        assert pw.violations == []


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_result_page_in_headless_chromium(mails, tmp_path):
    queue, repo, base = mails
    chromium = shutil.which("chromium")
    if chromium is None:
        missing("chromium is not installed (apt-get install chromium)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    (tmp_path / "token").write_text(TOKEN)
    config = tmp_path / "bot.toml"
    config.write_text(f'[projects.{PROJECT}.trees]\nnet-next = "{base}"\n')
    port = _free_port()
    with PatchworkServer() as pw:
        pw.add_project(PROJECT, LIST_ID)
        series = pw.add_series(PROJECT, *queue["buggy"][:1])
        result = subprocess.run([sys.executable, "-m", "patchbench", "bot", "--patchwork", pw.url, "--project",
                                 PROJECT, "--tree", str(repo), "--token-file", str(tmp_path / "token"),
                                 "--config", str(config), "--db", str(tmp_path / "db"), "--pages",
                                 str(tmp_path / "pages"), "--pages-url", f"http://127.0.0.1:{port}", "--once"],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
    url = next(c[4] for c in pw.all_checks() if c[2] == "fail")
    server = subprocess.Popen([sys.executable, "-m", "patchbench", "bot", "serve", "--pages", str(tmp_path / "pages"),
                               "--port", str(port)], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert "serving" in server.stdout.readline()
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200
        OUTPUT.mkdir(parents=True, exist_ok=True)
        screenshot = OUTPUT / "bot-patch-page.png"
        screenshot.unlink(missing_ok=True)
        flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", f"--user-data-dir={tmp_path / 'chromium'}",
                 "--window-size=1100,800"]
        shot = subprocess.run(flags + [f"--screenshot={screenshot}", url], capture_output=True, text=True,
                              timeout=180)
        assert shot.returncode == 0, shot.stderr[-2000:]
        dom = subprocess.run(flags + ["--dump-dom", url], capture_output=True, text=True, timeout=180)
        assert dom.returncode == 0, dom.stderr[-2000:]
    finally:
        server.terminate()
        server.wait(timeout=30)
    data = screenshot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000   # a rendered page, not an empty canvas
    print(f"screenshot: {screenshot}")
    # what the browser rendered (JavaScript plays no part: the page has none)
    line, _ = positions(queue)
    assert f"drivers/net/tap.c:{line}" in dom.stdout and "ptr-ring-consume-unlocked" in dom.stdout
    assert "return __ptr_ring_consume(&amp;q-&gt;ring);" in dom.stdout
    assert series["patches"][1]["name"] in dom.stdout.replace("&amp;", "&")
