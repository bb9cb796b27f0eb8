"""The patchwork CI bot against a stand-in patchwork on loopback, with the 6.1 kernel tree.

The stand-in (tests/support/patchwork_server.py) validates every request the bot makes, and every
answer it gives, against ../shared/specs/patchwork-api-v1.3.yaml; each test asserts there were no
violations. The bot runs as the real command (`python3 -m patchbench bot ... --once`).
"""

from __future__ import annotations

import email
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from email import policy
from pathlib import Path

import pytest

from tests.support.bot_queue import LIST_ID, PROJECT, build_queue, positions
from tests.support.patchwork_server import TOKEN, PatchworkServer

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.kernel

FINDING = "1 new finding(s); first: ptr-ring-consume-unlocked at drivers/net/tap.c:{line}"
NOT_APPLYING = "patch 2/2 does not apply to net-next at {base}: drivers/net/tap.c, {hunk}"
INCOMPLETE = "incomplete series: 2 of 3 patches received; not tested"

@pytest.fixture(autouse=True, scope="module")
def _spec(patchwork_spec):
    """The stand-in checks every request and answer against patchwork's API description."""


@pytest.fixture(scope="module")
def setup(kernel_clone, tmp_path_factory):
    repo, base = kernel_clone
    root = tmp_path_factory.mktemp("bot")
    queue = build_queue(repo, base, root / "mails")
    (root / "token").write_text(TOKEN + "\n")
    config = root / "bot.toml"
    config.write_text(f'[projects.{PROJECT}]\nwait_incomplete = 3600\nmail_to = ["{PROJECT}@example.org"]\n'
                      f'[projects.{PROJECT}.trees]\nnet-next = "{base}"\n')
    line, hunk = positions(queue)
    return {"repo": repo, "base": base, "root": root, "queue": queue, "config": config, "line": line, "hunk": hunk}


def load(pw: PatchworkServer, queue) -> dict[str, dict]:
    pw.add_project(PROJECT, LIST_ID)
    return {name: pw.add_series(PROJECT, mails, total) for name, (mails, total) in queue.items()}


def bot_argv(pw, setup, state: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "patchbench", "bot", "--patchwork", pw.url, "--project", PROJECT,
            "--tree", str(setup["repo"]), "--token-file", str(setup["root"] / "token"),
            "--config", str(setup["config"]), "--db", str(state / "bot.sqlite"), "--pages", str(state / "pages"),
            "--pages-url", "http://127.0.0.1:8080/ci", *extra]


def run_bot(pw, setup, state: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(bot_argv(pw, setup, state, "--once", *extra), cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)


def expected_checks(series: dict[str, dict], setup: dict, incomplete_reported: bool) -> set[tuple]:
    """(patch id, context, state, description) the queue must end with."""
    base, finding = setup["base"], FINDING.format(line=setup["line"])
    applied = f"applied to net-next at {base[:12]} (net-next is {base} in the bot's configuration)"
    clean = "no new findings in 1 C file(s)"
    per_patch_check = {"clean": ["success", "success"], "buggy": ["success", "fail"],
                       "v1": ["success", "fail"], "v2": ["success", "fail", "success"]}
    want = set()
    for name, states in per_patch_check.items():
        for patch, state in zip(series[name]["patches"], states):
            want.add((patch["id"], "patchbench-apply", "success", applied))
            want.add((patch["id"], "patchbench-check", state, clean if state == "success" else finding))
    for patch in series["broken"]["patches"]:
        want.add((patch["id"], "patchbench-apply", "fail", NOT_APPLYING.format(base=base[:12], hunk=setup["hunk"])))
    if incomplete_reported:
        for patch in series["partial"]["patches"]:
            want.add((patch["id"], "patchbench-apply", "warning", INCOMPLETE))
    return want


def posted(pw: PatchworkServer) -> list[tuple]:
    return [check[:4] for check in pw.all_checks()]


def test_queue_gets_exactly_the_expected_checks(setup, tmp_path):
    with PatchworkServer() as pw:
        series = load(pw, setup["queue"])
        first = run_bot(pw, setup, tmp_path)
        assert first.returncode == 0, first.stderr
        checks = posted(pw)
        assert len(checks) == len(set(checks)), "a check was posted twice"
        # the incomplete series is being waited for: nothing posted on it yet
        assert set(checks) == expected_checks(series, setup, incomplete_reported=False)

        later = run_bot(pw, setup, tmp_path, "--wait-incomplete", "0")
        assert later.returncode == 0, later.stderr
        checks = posted(pw)
        assert len(checks) == len(set(checks))
        assert set(checks) == expected_checks(series, setup, incomplete_reported=True)

        again = run_bot(pw, setup, tmp_path, "--wait-incomplete", "0")
        assert again.returncode == 0 and posted(pw) == checks, "a second round re-posted"
        assert pw.violations == []

        # every check links to its patch's page, which exists and names the finding with its code line
        for patch_id, _, _, _, url in pw.all_checks():
            assert url.startswith("http://127.0.0.1:8080/ci/series/") and url.endswith(f"/patch-{patch_id}.html")
            assert (tmp_path / "pages" / url.removeprefix("http://127.0.0.1:8080/ci/")).is_file()
        buggy = series["buggy"]
        page = (tmp_path / "pages" / f"series/{buggy['id']}/patch-{buggy['patches'][1]['id']}.html").read_text()
        assert f"drivers/net/tap.c:{setup['line']}" in page and "return __ptr_ring_consume(&amp;q-&gt;ring);" in page
        assert "<script" not in page
        broken = series["broken"]
        page = (tmp_path / "pages" / f"series/{broken['id']}/index.html").read_text()
        assert setup["hunk"] in page and "patch does not apply" in page


def test_api_errors_back_off_rate_limits_wait_token_never_shown(setup, tmp_path):
    with PatchworkServer() as pw:
        series = load(pw, {"buggy": setup["queue"]["buggy"]})
        pw.fail_next(503, 2)
        pw.fail_next(429, 1, retry_after="2")
        started = time.monotonic()
        result = run_bot(pw, setup, tmp_path)
        took = time.monotonic() - started
        assert result.returncode == 0, result.stderr
        assert "rate limited, waiting 2.0 s" in result.stderr and "HTTP 503; retrying" in result.stderr
        assert took >= 2 + 1 + 2   # Retry-After, then back-off 1 s and 2 s
        assert len(posted(pw)) == 4 and pw.violations == []
        written = [p.read_bytes() for p in (tmp_path / "pages").rglob("*") if p.is_file()]
        assert written and not any(TOKEN.encode() in data for data in written)
        assert TOKEN not in result.stderr + result.stdout
        assert (tmp_path / "bot.sqlite").read_bytes().find(TOKEN.encode()) == -1

        # patchwork gone for good: one clear line, exit 2, and the checks are still owed, not lost
        pw.add_series(PROJECT, setup["queue"]["clean"][0])
        pw.fail_next(503, 100)
        down = run_bot(pw, setup, tmp_path)
        assert down.returncode == 2
        assert down.stderr.strip().splitlines()[-1].startswith("patchbench: error: patchwork: GET ")
        assert "Traceback" not in down.stderr
        assert len(posted(pw)) == len({p["id"] for p in series["buggy"]["patches"]}) * 2


class Killer:
    """SIGKILLs the bot from inside the stand-in once the n-th request (or the n-th check created) is
    handled, before the bot sees the answer."""

    def __init__(self, process, after: int, checks_only: bool):
        self.process, self.after, self.checks_only, self.seen = process, after, checks_only, 0

    def __call__(self, method: str, path: str, status: int) -> None:
        if self.checks_only and not (method == "POST" and status == 201):
            return
        self.seen += 1
        if self.seen == self.after:
            self.process.send_signal(signal.SIGKILL)


def test_sigkill_at_random_points_loses_and_doubles_nothing(setup, tmp_path):
    """A clean run, then 10 runs SIGKILLed and restarted, at random points: after the n-th request to
    patchwork, after the k-th check created (before the bot saw the answer), or at a random moment
    within the clean run's duration (twice in some runs). Every run ends as the clean run did."""
    from tests.support.smtp import SmtpSink

    rng = random.Random(20261201)
    reference, duration, requests = None, None, None
    for run in range(11):
        state = tmp_path / f"run{run}"
        with PatchworkServer() as pw, SmtpSink() as smtp:
            series = load(pw, setup["queue"])
            extra = ("--wait-incomplete", "0", "--smtp", f"127.0.0.1:{smtp.port}")
            kills = []
            for attempt in range(0 if run == 0 else 1 + (run % 4 == 3)):
                process = subprocess.Popen(bot_argv(pw, setup, state, "--once", *extra), cwd=ROOT,
                                           env={**os.environ, "PYTHONPATH": str(ROOT)},
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                if run % 3 != 0:
                    checks_only = run % 3 == 1
                    after = rng.randint(1, 21) if checks_only else rng.randint(1, requests - 1)
                    pw.observer = Killer(process, after, checks_only)
                    process.wait(timeout=600)
                    pw.observer = None
                    if process.returncode == -signal.SIGKILL:
                        kills.append(f"after {'check' if checks_only else 'request'} {after}")
                    continue
                delay = rng.uniform(0.3, 0.6 * duration)
                try:
                    process.wait(timeout=delay)
                except subprocess.TimeoutExpired:
                    process.send_signal(signal.SIGKILL)
                    process.wait()
                    kills.append(f"at {delay:.2f} s ({len(pw.all_checks())} checks, {len(smtp.messages)} mails)")
            started, before = time.monotonic(), len(pw.requests)
            final = run_bot(pw, setup, state, *extra)
            if run == 0:
                duration, requests = time.monotonic() - started, len(pw.requests) - before
            assert final.returncode == 0, final.stderr
            assert run == 0 or kills, f"run {run}: the bot was never killed"
            checks = posted(pw)
            mails = sorted((m["In-Reply-To"], m["Message-Id"]) for m in smtp.messages)
            assert len(checks) == len(set(checks)), f"run {run} (killed {kills}): a check posted twice"
            assert len(mails) == len({m[1] for m in mails}), f"run {run} (killed {kills}): a mail sent twice"
            assert set(checks) == expected_checks(series, setup, incomplete_reported=True), \
                f"run {run} (killed {kills})"
            assert pw.violations == []
            # the same queue in a fresh stand-in gets the same ids, so whole runs compare directly
            outcome = (sorted(checks), [m[0] for m in mails])
            if reference is None:
                reference = outcome
            assert outcome == reference, f"run {run} (killed {kills}) differs from the clean run"
            print(f"run {run}: killed {kills}")
    assert len(reference[0]) == 22 and len(reference[1]) == 4   # mails: buggy, broken (series), v1, v2


def test_reply_mail_is_threaded_plain_text_and_sent_once(setup, tmp_path):
    from tests.support.smtp import SmtpSink

    with PatchworkServer() as pw, SmtpSink() as smtp:
        series = load(pw, {name: setup["queue"][name] for name in ("clean", "buggy", "broken")})
        result = run_bot(pw, setup, tmp_path, "--smtp", f"127.0.0.1:{smtp.port}",
                         "--mail-from", "patchbench CI <ci@example.org>")
        assert result.returncode == 0, result.stderr
        again = run_bot(pw, setup, tmp_path, "--smtp", f"127.0.0.1:{smtp.port}")
        assert again.returncode == 0
        assert len(smtp.messages) == 2, "one reply to the buggy patch, one to the cover of the broken series"
        by_parent = {m["In-Reply-To"]: m for m in smtp.messages}

        buggy_patch = series["buggy"]["patches"][1]
        reply = by_parent[buggy_patch["msgid"]]
        assert reply["References"] == buggy_patch["msgid"]
        assert reply["Subject"] == f"Re: {buggy_patch['name']}"
        assert reply.get_content_type() == "text/plain" and not reply.is_multipart()
        assert "ada@example.org" in reply["To"] and f"{PROJECT}@example.org" in reply["To"]
        body = reply.get_content()
        assert f"drivers/net/tap.c:{setup['line']}: error: ptr-ring-consume-unlocked" in body
        assert f"{setup['line']} | \treturn __ptr_ring_consume(&q->ring);" in body
        assert f"patchbench check {series['buggy']['cover_letter']['msgid'].strip('<>')} --tree ." in body
        assert f"/series/{series['buggy']['id']}/patch-{buggy_patch['id']}.html" in body

        cover = series["broken"]["cover_letter"]
        reply = by_parent[cover["msgid"]]
        assert reply["References"] == cover["msgid"]
        assert "patch 2/2 does not apply" in reply.get_content() and setup["hunk"] in reply.get_content()
        assert smtp.envelopes[0][0] == "ci@example.org"


def test_dry_run_writes_a_maildir_once(setup, tmp_path):
    with PatchworkServer() as pw:
        load(pw, {"buggy": setup["queue"]["buggy"]})
        for _ in range(2):
            assert run_bot(pw, setup, tmp_path, "--maildir", str(tmp_path / "mail")).returncode == 0
    written = list((tmp_path / "mail" / "new").iterdir())
    assert len(written) == 1
    msg = email.message_from_bytes(written[0].read_bytes(), policy=policy.default)
    assert msg["In-Reply-To"].startswith("<") and "ptr-ring-consume-unlocked" in msg.get_content()


def test_bad_input_is_one_line(setup, tmp_path):
    with PatchworkServer() as pw:
        load(pw, {})
        cases = [("--token-file", str(tmp_path / "absent")), ("--stages", "check,fuzz"),
                 ("--smtp", "no-port")]
        for flag, value in cases:
            result = run_bot(pw, setup, tmp_path, flag, value)
            assert result.returncode == 2, (flag, result.stderr)
            assert result.stderr.startswith("patchbench: error: ") and result.stderr.count("\n") == 1
        not_a_tree = subprocess.run([sys.executable, "-m", "patchbench", "bot", "--patchwork", pw.url, "--project",
                                     PROJECT, "--tree", str(tmp_path), "--once", "--db", str(tmp_path / "db")],
                                    cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert not_a_tree.returncode == 2 and "is not a git repository" in not_a_tree.stderr
        assert not (tmp_path / "db").exists()
        argv = bot_argv(pw, setup, tmp_path, "--once")
        argv[argv.index("--project") + 1] = "nodev"
        unknown = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert unknown.returncode == 2 and "has no project 'nodev'" in unknown.stderr
        bad_branch = tmp_path / "bad.toml"
        bad_branch.write_text('[projects.netdev.trees]\nnet = "no-such-branch"\n')
        result = run_bot(pw, setup, tmp_path, "--config", str(bad_branch))
        assert result.returncode == 2 and "the net tree's base 'no-such-branch' is not a commit" in result.stderr


def test_the_stand_in_catches_a_request_the_spec_forbids():
    """The validation the other tests rely on is not vacuous: a check the spec does not allow is reported."""
    import json
    import urllib.error
    import urllib.request

    with PatchworkServer() as pw:
        pw.add_project(PROJECT, LIST_ID)
        for body, category in (({"state": "bogus", "context": "has space"}, None), (None, "no-such-category")):
            url = f"{pw.url}/api/1.3/" + ("patches/1/checks/" if body else f"events/?category={category}")
            request = urllib.request.Request(url, data=json.dumps(body).encode() if body else None,
                                             headers={"User-Agent": "patchbench-bot", "Content-Type": "application/json",
                                                      "Authorization": f"Token {TOKEN}"})
            try:
                urllib.request.urlopen(request, timeout=30).read()
            except urllib.error.HTTPError:
                pass
        assert len(pw.violations) == 2, pw.violations
        assert "POST /api/1.3/patches/1/checks/" in pw.violations[0]
        assert "InvalidParameter" in pw.violations[1] and "category" in pw.violations[1]


def test_the_loop_picks_up_a_series_posted_later_and_stops_on_sigterm(setup, tmp_path):
    with PatchworkServer() as pw:
        series = load(pw, {"clean": setup["queue"]["clean"]})
        process = subprocess.Popen(bot_argv(pw, setup, tmp_path, "--interval", "0.5"), cwd=ROOT,
                                   env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 300
            while len(pw.all_checks()) < 4 and time.monotonic() < deadline:
                time.sleep(0.5)
            series.update(buggy=pw.add_series(PROJECT, setup["queue"]["buggy"][0]))
            while len(pw.all_checks()) < 8 and time.monotonic() < deadline:
                time.sleep(0.5)
        finally:
            process.terminate()
            _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0 and stderr.rstrip().endswith("INFO stopped"), stderr
        want = {c for c in expected_checks({**series, **{k: {"patches": []} for k in ("broken", "partial", "v1", "v2")}},
                                           setup, incomplete_reported=False)}
        assert set(posted(pw)) == want and len(posted(pw)) == 8
        assert pw.violations == []


def test_state_in_a_real_postgresql(setup, tmp_path):
    from tests.conftest import missing
    from tests.support.postgres import PostgresServer, binaries

    if binaries() is None:
        missing("PostgreSQL server binaries are not installed (apt-get install postgresql)")
    with PostgresServer(binaries()) as database, PatchworkServer() as pw:
        series = load(pw, {"buggy": setup["queue"]["buggy"]})
        for _ in range(2):
            result = run_bot(pw, setup, tmp_path, "--db", database.url)
            assert result.returncode == 0, result.stderr
        assert len(posted(pw)) == 4 and len(set(posted(pw))) == 4
        assert ("fail" in {state for _, context, state, _ in posted(pw) if context == "patchbench-check"})
        assert not (tmp_path / "bot.sqlite").exists() and pw.violations == []
        assert {patch for patch, *_ in posted(pw)} == {p["id"] for p in series["buggy"]["patches"]}


@pytest.mark.slow
def test_build_stage_posts_one_check_per_patch(setup, tmp_path):
    """--stages check,build: each patch's touched objects compiled with W=1 before and after it, in
    the shared build directories of `patchbench build` (the first run on a machine configures one)."""
    for tool in ("make", "gcc", "ccache", "bwrap", "flex", "bison", "bc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    with PatchworkServer() as pw:
        series = load(pw, {"buggy": setup["queue"]["buggy"]})
        result = run_bot(pw, setup, tmp_path, "--stages", "check,build")
        assert result.returncode == 0, result.stderr
        builds = sorted((patch, state, text) for patch, context, state, text in posted(pw)
                        if context == "patchbench-build")
        assert builds == [(p["id"], "success", "build pass; no new warnings") for p in series["buggy"]["patches"]]
        assert len(posted(pw)) == 6 and pw.violations == []


def test_a_series_patchbench_refuses_is_reported_not_tested(setup, tmp_path):
    """A diff with a path out of the tree: apply refuses the whole series; every patch says why."""
    from tests.support.bot_queue import mails
    from tests.support.ring_series import TAP_HELPER, TUN_HELPER, tap_patch, tun_patch

    texts = mails(setup["repo"], setup["base"], [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER)], tmp_path / "unsafe")
    texts[1] = texts[1].replace(b"a/drivers/net/tun.c", b"a/../outside.c").replace(b"b/drivers/net/tun.c",
                                                                                    b"b/../outside.c")
    with PatchworkServer() as pw:
        pw.add_project(PROJECT, LIST_ID)
        series = pw.add_series(PROJECT, texts)
        result = run_bot(pw, setup, tmp_path)
        assert result.returncode == 0, result.stderr
        checks = posted(pw)
        assert [(patch, context, state) for patch, context, state, _ in checks] == [
            (p["id"], "patchbench-apply", "warning") for p in series["patches"]]
        assert all(text.startswith("not tested: ") and "outside.c" in text for *_, text in checks), checks
        assert pw.violations == []


def test_the_bot_on_a_celery_farm_posts_the_same_checks(setup, tmp_path):
    """Issue 13: the bot sends each patch's check to the farm and collects the results as they come."""
    from tests.conftest import require_tool
    from tests.support.farm import Workers, redis_server

    require_tool("redis-server")
    with redis_server(tmp_path) as broker, PatchworkServer() as pw:
        workers = Workers(broker, tmp_path)
        try:
            workers.start("w1@bot")
            series = load(pw, setup["queue"])
            done = run_bot(pw, setup, tmp_path, "--wait-incomplete", "0", "--runner", "celery", "--broker", broker)
            assert done.returncode == 0, done.stderr
            checks = posted(pw)
            assert len(checks) == len(set(checks))
            assert set(checks) == expected_checks(series, setup, incomplete_reported=True)
            assert "on w1@bot" in done.stderr   # the jobs ran on the farm's worker
            assert pw.violations == []
        finally:
            workers.stop()


def test_netdev_stage_posts_each_check_on_each_patch_as_check_reports_it(setup, tmp_path):
    """--stages check,netdev: one check per patch per netdev check that ran (context
    patchbench-netdev-<id>), its state from the findings `patchbench check --checks netdev` gives
    that patch on the same mails: fail for an error, warning for others, success for none."""
    mails = tmp_path / "mails"
    mails.mkdir()
    for number, mail in enumerate(setup["queue"]["buggy"][0]):
        (mails / f"{number:04}.eml").write_bytes(mail)
    report = subprocess.run([sys.executable, "-m", "patchbench", "check", str(mails), "--tree", str(setup["repo"]),
                             "--base", setup["base"], "--checks", "netdev", "--format", "json"],
                            cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            timeout=600)
    assert report.returncode in (0, 1), report.stderr
    checked = json.loads(report.stdout)
    ran = {run["id"] for run in checked["checks"] if run["status"] == "ran"} - {"rules"}
    assert {"checkpatch", "signoff", "maintainers"} <= ran
    with PatchworkServer() as pw:
        series = load(pw, {"buggy": setup["queue"]["buggy"]})
        result = run_bot(pw, setup, tmp_path / "state", "--stages", "check,netdev")
        assert result.returncode == 0, result.stderr
        netdev = {(patch, context): (state, text) for patch, context, state, text in posted(pw)
                  if context.startswith("patchbench-netdev-")}
        patches = series["buggy"]["patches"]
        assert set(netdev) == {(p["id"], f"patchbench-netdev-{check}") for p in patches for check in ran}
        for index, patch in enumerate(patches, start=1):
            for check in ran:
                found = [f for f in checked["findings"] if f["rule"] == check and f["patch"] == index]
                state = ("fail" if any(f["severity"] == "error" for f in found) else "warning") if found else "success"
                assert netdev[(patch["id"], f"patchbench-netdev-{check}")][0] == state, (index, check)
        assert pw.violations == []
