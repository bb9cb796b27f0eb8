"""The report a maintainer pastes into a reply, on real series against the 6.1 tree.

A `[PATCH net-next v2 n/3]` series (git format-patch -v2) of the seeds' tun/tap shape: patch 2 adds
a tap_ring_consume() that returns with the consumer lock held, patch 3 wakes the subqueue after
rcu_read_unlock(). The report must name the patches as posted, quote the offending lines and the
line where the lock was taken / the section ended, keep to 100 (text) and 72 (mail) columns, and
close with what was checked. A series whose patch 2 does not apply is named with its hunk.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from patchbench.checks.engine import registry
from patchbench.cli import main
from tests.support.git_series import format_patch, git
from tests.support.ring_series import TAP, TUN, TUN_HELPER, WAKE_PATCH, commit_series, tap_patch, tun_patch
from tests.test_checks_report import SARIF_REQUIRED

ROOT = Path(__file__).resolve().parents[1]

TAP_HELPER_EARLY_RETURN = """static void *tap_ring_consume(struct tap_queue *q)
{
	struct ptr_ring *ring = &q->ring;
	void *ptr;

	spin_lock(&ring->consumer_lock);
	if (__ptr_ring_empty(ring))
		return NULL;
	ptr = __ptr_ring_consume(ring);
	spin_unlock(&ring->consumer_lock);

	return ptr;
}

"""
INSIDE = "\t\tif (tun)\n\t\t\tnetif_wake_subqueue(tun->dev, tfile->queue_index);\n\t\trcu_read_unlock();\n"
AFTER = "\t\trcu_read_unlock();\n\t\tif (tun)\n\t\t\tnetif_wake_subqueue(tun->dev, tfile->queue_index);\n"
LATE_WAKE_PATCH = (TUN, WAKE_PATCH[1], [(WAKE_PATCH[2][0][0], WAKE_PATCH[2][0][1].replace(INSIDE, AFTER))])
PATCHES = [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER_EARLY_RETURN), LATE_WAKE_PATCH]
NAMES = ["[PATCH net-next v2 1/3] tun: add tun_ring_consume() and use it in tun_ring_recv()",
         "[PATCH net-next v2 2/3] tap: add tap_ring_consume() and use it in tap_do_read()",
         "[PATCH net-next v2 3/3] tun: wake the subqueue when consuming made room"]


@pytest.fixture(autouse=True)
def private_facts_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHBENCH_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def mailed(kernel_clone, tmp_path):
    """The v2 net-next series mailed into a directory: (mail directory, repo, base, commits)."""
    repo, base = kernel_clone
    tip = commit_series(repo, base, PATCHES)
    out = tmp_path / "series"
    format_patch(repo, base, tip, out, "-v2", "--subject-prefix=PATCH net-next")
    return out, repo, base, git(repo, "rev-list", "--reverse", f"{base}..{tip}").split()


def check(capsys, series: Path, repo: Path, fmt: str) -> tuple[int, str]:
    code = main(["check", str(series), "--tree", str(repo), "--format", fmt, "--checks", "rules"])
    return code, capsys.readouterr().out


def _width(text: str) -> int:
    return max(len(line.expandtabs(8)) for line in text.splitlines())


def _line_of(repo: Path, commit: str, path: str, number: int) -> str:
    return git(repo, "show", f"{commit}:{path}").split("\n")[number - 1]


@pytest.mark.kernel
def test_json_carries_the_quoted_and_related_lines_of_the_real_files(mailed, capsys):
    series, repo, base, commits = mailed
    code, out = check(capsys, series, repo, "json")
    report = json.loads(out)
    assert code == 1
    assert [p["name"] for p in report["patches"]] == NAMES
    assert report["series"]["name"] == "[PATCH net-next v2 0/3] *** SUBJECT HERE ***"
    assert report["series"]["tree"] == "net-next" and report["series"]["base"] == base
    by_rule = {f["rule"]: f for f in report["findings"]}
    lock, escape = by_rule["lock-imbalance"], by_rule["rcu-pointer-escapes"]
    assert (lock["patch"], lock["function"], escape["patch"], escape["function"]) == (
        2, "tap_ring_consume", 3, "tun_ring_consume")
    # the quoted lines are the patch's own version of the file, at the lines reported
    assert lock["source"] == _line_of(repo, commits[1], TAP, lock["line"]) == "\t\treturn NULL;"
    assert lock["related"]["what"] == "lock taken"
    assert lock["related"]["text"] == _line_of(repo, commits[1], TAP, lock["related"]["line"]) \
        == "\tspin_lock(&ring->consumer_lock);"
    # the NULL test between the unlock and the wake is no use of the pointer: the wake is
    assert escape["source"] == "\t\t\tnetif_wake_subqueue(tun->dev, tfile->queue_index);"
    assert escape["related"] == {"what": "read-side section ended", "line": escape["line"] - 2,
                                 "text": "\t\trcu_read_unlock();"}
    assert _line_of(repo, commits[2], TUN, escape["line"] - 2) == "\t\trcu_read_unlock();"


@pytest.mark.kernel
def test_text_report_has_header_posted_names_quotes_and_summary(mailed, capsys):
    series, repo, base, commits = mailed
    code, text = check(capsys, series, repo, "text")
    assert code == 1 and _width(text) <= 100
    lines = text.splitlines()
    assert lines[:3] == ["Series: [PATCH net-next v2 0/3] *** SUBJECT HERE ***", "Tree:   net-next",
                         f"Base:   {base[:12]} (base-commit: from the series)"]
    for name in NAMES:
        assert name in lines
    assert not any(commit[:12] in text for commit in commits)   # patches are not named by local commit
    patch2 = lines.index(NAMES[1])
    assert lines[patch2 + 1] == "  1 new finding"
    block = "\n".join(lines[patch2:lines.index(NAMES[2])])
    assert re.search(r"drivers/net/tap\.c:\d+: error: in tap_ring_consume\(\) \[lock-imbalance\]", block)
    assert re.search(r"\n +\d+ \| +return NULL;\n +lock taken:\n +\d+ \| +spin_lock\(&ring->consumer_lock\);", block)
    assert "read-side section ended:" in text.split(NAMES[2])[1]
    assert re.search(rf"^Checked 3 patches, 2 C files, {len(registry.default_rule_ids())} rules in \d+\.\d s: 2 new findings\.$",
                     text, re.M)
    assert "Files: drivers/net/tap.c, drivers/net/tun.c" in text


@pytest.mark.kernel
def test_mail_format_is_a_reply_body_to_paste(mailed, capsys):
    series, repo, _, _ = mailed
    code, mail = check(capsys, series, repo, "mail")
    assert code == 1 and _width(mail) <= 72
    flowing = " ".join(mail.split())
    assert f"In {NAMES[1]}:" in flowing and f"In {NAMES[2]}:" in flowing
    assert f"No new findings in {NAMES[0]}." in flowing
    quoted = [line for line in mail.splitlines() if line.startswith(">")]
    assert "> " + "\t\treturn NULL;".expandtabs(8) in quoted
    assert "> " + "\tspin_lock(&ring->consumer_lock);".expandtabs(8) in quoted
    assert "> " + "\t\trcu_read_unlock();".expandtabs(8) in quoted
    assert re.search(r"^Lock taken at line \d+:$", mail, re.M)
    assert "\n-- \nChecked 3 patches" in mail


@pytest.mark.kernel
def test_terse_lines_carry_the_patch_number(mailed, capsys):
    series, repo, _, _ = mailed
    _, terse = check(capsys, series, repo, "terse")
    assert any(re.match(rf"{TAP}:\d+: error: lock-imbalance: patch 2/3: spin_lock", line) for line in terse.splitlines())
    assert any(re.match(rf"{TUN}:\d+: error: rcu-pointer-escapes: patch 3/3: ", line) for line in terse.splitlines())


@pytest.mark.kernel
def test_sarif_of_an_applied_series_is_a_successful_run_with_related_locations(mailed, capsys):
    series, repo, _, _ = mailed
    _, out = check(capsys, series, repo, "sarif")
    log = json.loads(out)
    jsonschema.validate(log, SARIF_REQUIRED)
    run = log["runs"][0]
    assert run["invocations"] == [{"executionSuccessful": True}]
    lock = next(r for r in run["results"] if r["ruleId"] == "lock-imbalance")
    related = lock["relatedLocations"][0]
    assert related["message"]["text"] == "lock taken"
    assert related["physicalLocation"]["region"]["snippet"]["text"] == "\tspin_lock(&ring->consumer_lock);"


@pytest.fixture
def broken(mailed):
    """The same series with patch 2's context changed in the mail: it no longer applies."""
    series, repo, base, _ = mailed
    [mail] = series.glob("v2-0002-*.patch")
    text = mail.read_text()
    assert "\n static ssize_t tap_do_read(struct tap_queue *q,\n" in text
    mail.write_text(text.replace("\n static ssize_t tap_do_read(struct tap_queue *q,\n",
                                 "\n static ssize_t tap_do_read(struct tap_queue *queue,\n"))
    return series, repo


@pytest.mark.kernel
def test_a_series_that_does_not_apply_names_the_patch_and_hunk(broken, capsys):
    series, repo = broken
    code, terse = check(capsys, series, repo, "terse")
    assert code == 1
    match = re.fullmatch(rf"{TAP}:(\d+): error: apply: patch 2/3 does not apply at hunk @@ -(\d+),\d+ \+\d+,\d+ @@"
                         rf".*: {re.escape(NAMES[1])}: .+", terse.splitlines()[-1])
    assert match and match[1] == match[2] and int(match[1]) > 0
    _, text = check(capsys, series, repo, "text")
    assert f"{NAMES[1]}\n  does not apply at {TAP}, @@ -" in text
    assert "patch 3 was not applied or checked" in text
    assert f"Checked 1 of 3 patches, 1 C file, {len(registry.default_rule_ids())} rules in " in text
    assert _width(text) <= 100


@pytest.mark.kernel
def test_sarif_of_a_series_that_does_not_apply_is_a_failed_invocation(broken, capsys):
    series, repo = broken
    code, out = check(capsys, series, repo, "sarif")
    log = json.loads(out)
    jsonschema.validate(log, SARIF_REQUIRED)
    run = log["runs"][0]
    assert code == 1
    [invocation] = run["invocations"]
    assert invocation["executionSuccessful"] is False
    note = invocation["toolExecutionNotifications"][0]
    assert note["level"] == "error" and note["message"]["text"].startswith(f"{NAMES[1]} does not apply")
    failure = [r for r in run["results"] if r["ruleId"] == "patch-does-not-apply"]
    assert len(failure) == 1 and failure[0]["properties"] == {"patch": 2} and failure[0]["level"] == "error"
    assert failure[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == TAP
    driver = run["tool"]["driver"]
    assert driver["rules"][failure[0]["ruleIndex"]]["id"] == "patch-does-not-apply"


def _timeless(text: str) -> list[str]:
    """The report without its summary line, which says how long the run took."""
    return [line for line in text.splitlines() if not line.startswith("Checked ")]


def _run_with_terminal_stderr(args: list[str], env: dict, python: tuple[str, ...] = ("-m", "patchbench")
                              ) -> tuple[int, str, bytes]:
    """Run patchbench with stderr on a pseudo-terminal: (exit code, stdout, what the terminal got)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, *python, *args], stdout=subprocess.PIPE,
                            stderr=follower, env=env, cwd=ROOT)
    os.close(follower)
    received = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:   # EIO: the terminal's other side is closed
            break
        if not chunk:
            break
        received += chunk
    stdout = proc.stdout.read().decode()
    os.close(leader)
    return proc.wait(timeout=600), stdout, received


@pytest.mark.kernel
def test_lint_shows_progress_on_a_terminal_only(kernel_tree, tmp_path):
    # three Intel drivers, analysed on one core without the cache: about 2 CPU-s here, so close
    # enough to the default one-second delay that a fast machine finished before the line was
    # due; the line is shown at once instead (redrawn every 0.25 s)
    directories = [str(kernel_tree / "drivers" / "net" / "ethernet" / "intel" / name) for name in ("e1000e", "igb", "ixgbe")]
    env = {**os.environ, "PATCHBENCH_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT),
           "PATCHBENCH_PROGRESS_DELAY": "0"}
    args = ["lint", *directories, "--no-cache", "-j", "1"]
    code, out, terminal = _run_with_terminal_stderr(args, env)
    assert code in (0, 1)
    assert re.search(rb"\r\x1b\[Kpatchbench lint: checking files \d+/\d+ \(\d+ s\)", terminal), terminal[:300]
    assert terminal.endswith(b"\r\x1b[K")          # erased at the end: nothing of it stays
    assert "patchbench lint:" not in out
    piped = subprocess.run([sys.executable, "-m", "patchbench", *args], capture_output=True, text=True,
                           env=env, cwd=ROOT)
    assert _timeless(piped.stdout) == _timeless(out) and "patchbench lint:" not in piped.stderr
    _, _, terminal_json = _run_with_terminal_stderr([*args, "--format", "json"], env)
    assert b"patchbench lint:" not in terminal_json


@pytest.mark.kernel
def test_check_shows_its_stage_on_a_terminal_and_nothing_in_json(mailed, tmp_path):
    series, repo, _, _ = mailed
    args = ["check", str(series), "--tree", str(repo)]
    # the line appears at once here (a cold check of tun.c and tap.c takes about 2 s, too close to 1 s)
    env = {**os.environ, "PATCHBENCH_CACHE": str(tmp_path / "cold"), "PYTHONPATH": str(ROOT),
           "PATCHBENCH_PROGRESS_DELAY": "0"}
    code, out, terminal = _run_with_terminal_stderr(args, env)
    assert code == 1 and out.startswith("Series: ")
    assert re.search(rb"\r\x1b\[Kpatchbench check: (reading and applying the series|"
                     rb"checking 3 applied patches \(2 files\)) \(\d+ s\)", terminal), terminal[:300]
    assert terminal.endswith(b"\r\x1b[K")
    env["PATCHBENCH_CACHE"] = str(tmp_path / "cold-json")
    _, out, terminal = _run_with_terminal_stderr([*args, "--format", "json"], env)
    assert json.loads(out)["findings"] and b"patchbench check:" not in terminal


def test_a_check_shorter_than_the_delay_shows_no_progress(tmp_path):
    """The bundled example checks in about half a second: nothing appears on the terminal (the
    delay is raised to 5 s so that a loaded machine cannot make the run long enough to show it)."""
    example = ROOT / "fixtures" / "example"
    subprocess.run(["sh", str(example / "make-tree.sh"), str(tmp_path / "tree")], check=True)
    env = {**os.environ, "PATCHBENCH_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT),
           "PATCHBENCH_PROGRESS_DELAY": "5"}
    args = ["check", str(example / "series.mbox"), "--tree", str(tmp_path / "tree")]
    _run_with_terminal_stderr(args, env)   # fills the facts cache
    code, out, terminal = _run_with_terminal_stderr(args, env)
    assert code == 1 and "pbdemo_peek_len" in out and b"patchbench check:" not in terminal


def test_a_warning_printed_under_the_progress_line_gets_its_own_line():
    script = """if True:
        import sys, time
        from patchbench.report.progress import Progress
        with Progress("check", "text") as progress:
            progress.stage("applying")
            time.sleep(0.5)
            print("patchbench: warning: base-commit: abc is not in this repository", file=sys.stderr)
            time.sleep(0.5)
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATCHBENCH_PROGRESS_DELAY": "0"}
    _, _, terminal = _run_with_terminal_stderr([], env, ("-c", script))
    shown = terminal.decode()
    warning = "patchbench: warning: base-commit: abc is not in this repository"
    # the status was erased before the warning, which ends its own line, and then came back
    assert f"\r\x1b[K{warning}\r\n" in shown, shown
    before, after = shown.split(warning)
    assert "patchbench check: applying" in before and "patchbench check: applying" in after
    assert shown.endswith("\r\x1b[K")
