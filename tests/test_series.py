"""Reading a netdev-style mailbox (v1 and v2 mixed, with reviews) in every shape a maintainer gets it."""

from __future__ import annotations

import gzip
import json
import quopri
import subprocess
import sys
from pathlib import Path

import pytest

from patchbench.errors import BadInput
from patchbench.mail import read_mails
from patchbench.mail.sources import iter_raw_messages
from patchbench.series import load_series
from tests.conftest import require_tool

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mail"
NETDEV = FIXTURES / "netdev-v1-v2.mbox"
ACK = "Acked-by: Carol Maintainer <carol@example.net>"
REVIEW = "Reviewed-by: Bob Reviewer <bob@example.com>"
SOB = "Signed-off-by: Ada Lovelace <ada@example.org>"
FIXES = 'Fixes: 0123456789ab ("ringbuf: add a toy ring buffer")'


def _messages() -> list[bytes]:
    return list(iter_raw_messages(str(NETDEV)))


def _assert_netdev_v2(series) -> None:
    assert (series.version, series.total, series.tree, series.subject_prefix) == (2, 2, "net-next", "PATCH net-next")
    assert series.other_versions == [1] and series.missing == []
    assert series.cover is not None and series.cover.message_id == "v2-0@example.org"
    assert [p.message_id for p in series.patches] == ["v2-1@example.org", "v2-2@example.org"]
    first, second = series.patches
    # own trailers first, then replies to the patch, then replies to the cover; quoted lines never
    assert first.trailers == [FIXES, SOB, REVIEW, ACK]
    assert second.trailers == [SOB, REVIEW, ACK]
    assert first.author == "Ada Lovelace <ada@example.org>"
    assert first.subject == "ringbuf: take the consumer lock in ring_pop()"
    assert first.date is not None and first.date.isoformat() == "2025-03-05T09:00:01+00:00"
    assert first.body.startswith("ring_pop() reads") and first.body.rstrip().endswith(SOB)
    assert first.diff.startswith("diff --git a/drivers/net/ringbuf.c") and "\r" not in first.diff
    assert [(f.path, f.status, f.added, f.removed) for f in first.files] == [("drivers/net/ringbuf.c", "modified", 5, 1)]
    assert series.base_commit == "4efe9b7f0a1bd0c8e3b6a4c2d1e0f9a8b7c6d5e4"
    assert series.prerequisite_patch_ids == ["0123456789abcdef0123456789abcdef01234567"]
    assert series.change_id == "20250303-ringbuf-tidy-0a1b2c3d4e5f"
    assert series.prerequisite_change_ids == ["20250201-ringbuf-base-9f8e7d6c5b4a:v3"]
    assert series.prerequisite_message_ids == ["20250201-ringbuf-base-v3-0@example.org"]


def test_newest_version_with_collected_trailers():
    _assert_netdev_v2(load_series(str(NETDEV)))


def test_older_version_when_asked():
    series = load_series(str(NETDEV), version=1)
    assert series.version == 1 and series.other_versions == [2]
    assert [p.message_id for p in series.patches] == ["v1-1@example.org", "v1-2@example.org"]
    assert series.patches[0].trailers == [SOB]   # the v1 review asked for changes and gave no tag
    assert series.base_commit is None


def _quoted_printable(raw: bytes) -> bytes:
    head, body = raw.split(b"\n\n", 1)
    return (head + b"\nMIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n"
            b"Content-Transfer-Encoding: quoted-printable\n\n" + quopri.encodestring(body, quotetabs=True))


def _write_mbox(path: Path, messages: list[bytes]) -> Path:
    path.write_bytes(b"".join(b"From mboxrd@z Thu Jan  1 00:00:00 1970\n" + m.rstrip(b"\n") + b"\n\n" for m in messages))
    return path


def test_quoted_printable_mail(tmp_path):
    source = _write_mbox(tmp_path / "qp.mbox", [_quoted_printable(m) for m in _messages()])
    assert b"=09" in source.read_bytes()   # tabs really are encoded
    _assert_netdev_v2(load_series(str(source)))


def test_crlf_mailbox(tmp_path):
    source = tmp_path / "crlf.mbox"
    source.write_bytes(NETDEV.read_bytes().replace(b"\n", b"\r\n"))
    _assert_netdev_v2(load_series(str(source)))


def test_gzip_and_leading_blank_lines(tmp_path):
    source = tmp_path / "thread.mbox.gz"
    source.write_bytes(gzip.compress(b"\n\n  \n" + NETDEV.read_bytes()))
    _assert_netdev_v2(load_series(str(source)))


def test_maildir(tmp_path):
    for sub in ("cur", "new", "tmp"):
        (tmp_path / sub).mkdir()
    for number, message in enumerate(_messages()):
        (tmp_path / ("cur" if number % 2 else "new") / f"17000000{number:02d}.M1P1.host:2,S").write_bytes(message)
    _assert_netdev_v2(load_series(str(tmp_path)))


def test_directory_of_patch_files(tmp_path):
    for number, message in enumerate(_messages()):
        (tmp_path / f"{number:04d}-mail.patch").write_bytes(message)
    (tmp_path / "notes.txt.orig").write_text("not a mail")
    _assert_netdev_v2(load_series(str(tmp_path)))


def test_missing_part_reported(tmp_path):
    v2_without_part_2 = [m for m in _messages() if b"v2-" in m.split(b"\n\n")[0] and b"<v2-2@" not in m.split(b"\n\n")[0]]
    series = load_series(str(_write_mbox(tmp_path / "partial.mbox", v2_without_part_2)))
    assert series.missing == [2] and [p.index for p in series.patches] == [1]


def test_diff_reply_is_not_a_part():
    series = load_series(str(NETDEV))
    assert all("suggest" not in p.message_id for p in series.patches)


def test_truncated_mailbox(tmp_path):
    data = NETDEV.read_bytes()
    cut = data.index(b"-static void *ring_peek", data.index(b"<v2-2@example.org>")) + 10
    source = tmp_path / "cut.mbox"
    source.write_bytes(data[:cut])
    with pytest.raises(BadInput, match="truncated"):
        load_series(str(source))
    zipped = tmp_path / "cut.mbox.gz"
    zipped.write_bytes(gzip.compress(data)[:-40])
    with pytest.raises(BadInput, match="truncated or corrupt"):
        load_series(str(zipped))


@pytest.mark.parametrize("content", [b"", b"\n\n", b"From: a@b\nSubject: hello\n\njust text\n"])
def test_no_patch_is_bad_input(tmp_path, content):
    source = tmp_path / "empty.mbox"
    source.write_bytes(content)
    with pytest.raises(BadInput, match="no patch found"):
        load_series(str(source))


def test_unreadable_path(tmp_path):
    with pytest.raises(BadInput, match="no such file"):
        load_series(str(tmp_path / "absent.mbox"))


def _cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "patchbench", "series", *args], input=stdin,
                          capture_output=True, cwd=Path(__file__).resolve().parents[1])


def test_cli_json_from_stdin():
    result = _cli("-", "--json", stdin=NETDEV.read_bytes())
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["version"], document["total"], document["tree"]) == (2, 2, "net-next")
    assert document["cover"]["message_id"] == "v2-0@example.org"
    assert document["patches"][1]["trailers"] == [SOB, REVIEW, ACK]
    assert document["patches"][0]["files"] == ["drivers/net/ringbuf.c"]
    assert document["other_versions"] == [1] and document["missing"] == []
    assert document["prerequisite_patch_ids"] == ["0123456789abcdef0123456789abcdef01234567"]


def test_cli_all_versions_and_summary():
    listed = json.loads(_cli(str(NETDEV), "--json", "--all-versions").stdout)
    assert [d["version"] for d in listed] == [1, 2]
    text = _cli(str(NETDEV)).stdout.decode()
    assert "net-next" in text and "v2" in text and ACK in text and "4efe9b7f" in text


def test_cli_errors_are_one_line(tmp_path):
    (tmp_path / "empty.mbox").write_bytes(b"")
    for args in ([str(tmp_path / "absent")], [str(tmp_path / "empty.mbox")], [str(NETDEV), "--version", "7"]):
        result = _cli(*args)
        assert result.returncode == 2
        assert result.stderr.decode().startswith("patchbench: error: ") and result.stderr.count(b"\n") == 1


def test_patches_apply_with_git(tmp_path):
    git = require_tool("git")
    source = tmp_path / "drivers" / "net" / "ringbuf.c"
    source.parent.mkdir(parents=True)
    lines = [f"/* line {n} */" for n in range(1, 10)] + [
        "{", "\tvoid *item = r->slots[r->tail];", "\treturn item;"] + [f"/* line {n} */" for n in range(13, 20)] + [
        "}", "static void *ring_peek(struct ring *r)", "{", "\treturn r->slots[r->tail];", "}", ""]
    source.write_text("\n".join(lines) + "\n")
    for patch in load_series(str(NETDEV)).patches:
        (tmp_path / "p.diff").write_text(patch.diff)
        result = subprocess.run([git, "apply", "p.diff"], cwd=tmp_path, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
    applied = source.read_text()
    assert "spin_lock(&r->consumer_lock);" in applied and "ring_peek" not in applied


def _edit(message: bytes, **headers: str | None) -> bytes:
    """Replace (or with None, drop) header lines of one raw message."""
    head, body = message.split(b"\n\n", 1)
    lines = head.split(b"\n")
    for name, value in headers.items():
        field = name.rstrip("_").replace("_", "-").encode()
        lines = [line for line in lines if not line.lower().startswith(field.lower() + b":")]
        if value is not None:
            lines.append(field + b": " + value.encode())
    return b"\n".join(lines) + b"\n\n" + body


def _by_id(msgid: str) -> bytes:
    return next(m for m in _messages() if f"\nMessage-Id: <{msgid}>".encode() in m.split(b"\n\n")[0])


def test_reroll_sent_part_by_part_in_reply_to_older_parts(tmp_path):
    """No v2 cover; v2 1/2 answers v1 1/2 and v2 2/2 answers v1 2/2: still one v2 of two parts."""
    v1 = [_by_id("v1-0@example.org"), _by_id("v1-1@example.org"), _by_id("v1-2@example.org")]
    v2 = [_edit(_by_id("v2-1@example.org"), in_reply_to="<v1-1@example.org>", references="<v1-1@example.org>"),
          _edit(_by_id("v2-2@example.org"), in_reply_to="<v1-2@example.org>", references="<v1-2@example.org>")]
    series = load_series(str(_write_mbox(tmp_path / "reroll.mbox", v1 + v2)))
    assert series.version == 2 and series.other_versions == [1] and series.cover is None
    assert [p.message_id for p in series.patches] == ["v2-1@example.org", "v2-2@example.org"]


def test_reply_without_thread_headers_matched_by_subject(tmp_path):
    review = _edit(_by_id("review-v2-1@example.com"), in_reply_to=None, references=None)
    messages = [_by_id("v2-0@example.org"), _by_id("v2-1@example.org"), _by_id("v2-2@example.org"), review]
    first = load_series(str(_write_mbox(tmp_path / "lost-headers.mbox", messages))).patches[0]
    assert first.trailers == [FIXES, SOB, REVIEW]


def test_reviewer_writing_from_another_address(tmp_path):
    same_name = _edit(_by_id("review-v2-1@example.com"), from_="Bob Reviewer <bob@home.example>")
    stranger = _edit(_by_id("ack-v2-0@example.net"), from_="Mallory <mallory@example.net>")
    messages = [_by_id("v2-0@example.org"), _by_id("v2-1@example.org"), same_name, stranger]
    first = load_series(str(_write_mbox(tmp_path / "addresses.mbox", messages))).patches[0]
    assert REVIEW in first.trailers   # same name, other address: still Bob's review
    assert ACK not in first.trailers  # nobody may give Carol's Acked-by for her


def test_versions_from_different_addresses_are_one_topic(tmp_path):
    v1 = [_by_id("v1-0@example.org"), _by_id("v1-1@example.org"), _by_id("v1-2@example.org")]
    v2 = [_edit(m, from_="Ada Lovelace <ada@work.example>") for m in
          (_by_id("v2-0@example.org"), _by_id("v2-1@example.org"), _by_id("v2-2@example.org"))]
    series = load_series(str(_write_mbox(tmp_path / "moved.mbox", v1 + v2)))
    assert series.version == 2 and series.other_versions == [1]
    assert series.patches[0].author == "Ada Lovelace <ada@work.example>"


def test_duplicate_copies_of_mails_are_read_once(tmp_path):
    messages = _messages()
    _assert_netdev_v2(load_series(str(_write_mbox(tmp_path / "twice.mbox", messages + messages[::-1]))))


def test_side_diff_stored_first_is_not_the_series(tmp_path):
    """An unnumbered diff posted (without Re:) inside the v2 thread, and stored before it."""
    side = _edit(_by_id("suggest-v2-2@example.com"), subject="[PATCH] ringbuf: drop a blank line")
    rest = [m for m in _messages() if b"<suggest-v2-2@example.com>" not in m.split(b"\n\n")[0]]
    series = load_series(str(_write_mbox(tmp_path / "side.mbox", [side] + rest)))
    assert series.version == 2 and [p.message_id for p in series.patches] == ["v2-1@example.org", "v2-2@example.org"]


def test_other_series_in_the_source_are_named(tmp_path):
    other = [_edit(m.replace(b"ringbuf:", b"otherdrv:").replace(b"@example.org>", b"@other.example>"),
                   subject=f"[PATCH net 1/1] otherdrv: fix the thing {n}") for n, m in
             enumerate([_by_id("v1-1@example.org")])]
    source = _write_mbox(tmp_path / "two.mbox", _messages() + other)
    series = load_series(str(source))
    assert series.version == 2 and series.other_series == ["otherdrv: fix the thing 0"]
    result = _cli(str(source))
    assert "1 other series" in result.stdout.decode() and "otherdrv: fix the thing 0" in result.stdout.decode()


def test_cover_letter_with_an_interdiff_is_still_the_cover(tmp_path):
    interdiff = (b"\nInterdiff against v1:\ndiff --git a/drivers/net/ringbuf.c b/drivers/net/ringbuf.c\n"
                 b"--- a/drivers/net/ringbuf.c\n+++ b/drivers/net/ringbuf.c\n@@ -10,2 +10,2 @@\n {\n-\tx;\n+\ty;\n")
    messages = [m + interdiff if b"\nMessage-Id: <v2-0@example.org>" in m.split(b"\n\n")[0] else m
                for m in _messages()]
    _assert_netdev_v2(load_series(str(_write_mbox(tmp_path / "interdiff.mbox", messages))))


def test_cli_marks_parts_kept_from_an_older_version(tmp_path):
    v1 = [_by_id("v1-0@example.org"), _by_id("v1-1@example.org"), _by_id("v1-2@example.org")]
    resent = _edit(_by_id("v2-2@example.org"), in_reply_to="<v1-2@example.org>", references="<v1-2@example.org>")
    source = _write_mbox(tmp_path / "partial-reroll.mbox", v1 + [resent])
    series = load_series(str(source))
    assert series.version == 2 and [(p.index, p.version) for p in series.patches] == [(1, 1), (2, 2)]
    assert series.cover is not None and series.cover.message_id == "v1-0@example.org" and series.missing == []
    lines = _cli(str(source)).stdout.decode().splitlines()
    assert any("1/2" in line and "kept from v1" in line for line in lines)
    assert not any("2/2" in line and "kept from" in line for line in lines)


SERIES_JSON_SCHEMA = {   # the `series --json` shape promised in DESIGN.md
    "type": "object",
    "required": ["version", "total", "tree", "subject_prefix", "cover", "patches", "missing", "base_commit",
                 "prerequisite_patch_ids", "other_versions"],
    "properties": {
        "version": {"type": "integer", "minimum": 1},
        "total": {"type": "integer", "minimum": 1},
        "tree": {"type": ["string", "null"]},
        "subject_prefix": {"type": "string"},
        "cover": {"oneOf": [{"type": "null"}, {"type": "object", "required": ["subject", "message_id"]}]},
        "patches": {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "required": ["index", "subject", "message_id", "author", "trailers", "files"],
            "properties": {"index": {"type": "integer"}, "author": {"type": "string", "pattern": "<.+@.+>$"},
                           "trailers": {"type": "array", "items": {"type": "string"}},
                           "files": {"type": "array", "items": {"type": "string"}}}}},
        "missing": {"type": "array", "items": {"type": "integer"}},
        "base_commit": {"type": ["string", "null"]},
        "prerequisite_patch_ids": {"type": "array", "items": {"type": "string"}},
        "other_versions": {"type": "array", "items": {"type": "integer"}},
    },
}


@pytest.mark.parametrize("args", [[str(NETDEV)], [str(NETDEV), "--version", "1"]])
def test_cli_json_matches_the_design_contract(args):
    import jsonschema   # a test dependency (pyproject [test]): never skipped
    document = json.loads(_cli(*args, "--json").stdout)
    jsonschema.validate(document, SERIES_JSON_SCHEMA)


def test_real_git_format_patch_directory(tmp_path):
    """A series made by git itself (format-patch --cover-letter --base --thread into a directory)."""
    git = require_tool("git")

    def run(*args: str) -> str:
        env = {"GIT_AUTHOR_NAME": "Ada Lovelace", "GIT_AUTHOR_EMAIL": "ada@example.org",
               "GIT_COMMITTER_NAME": "Ada Lovelace", "GIT_COMMITTER_EMAIL": "ada@example.org",
               "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
        return subprocess.run([git, *args], cwd=repo, env=env, check=True, capture_output=True,
                              text=True).stdout.strip()

    repo = tmp_path / "repo"
    repo.mkdir()
    run("init", "-q", "-b", "main")
    (repo / "ring.c").write_text("int ring;\n")
    (repo / "old.c").write_text("int old;\n")
    run("add", ".")
    run("commit", "-q", "-m", "base")
    base = run("rev-parse", "HEAD")
    (repo / "ring.c").write_text("int ring;\nint tail;\n")
    run("commit", "-q", "-am", "ring: add a tail\n\nCarry the tail index.\n\nSigned-off-by: Ada Lovelace <ada@example.org>")
    run("mv", "old.c", "new.c")
    (repo / "run.sh").write_text("#!/bin/sh\n")
    (repo / "run.sh").chmod(0o755)
    run("add", ".")
    run("commit", "-q", "-m", "tree: rename old.c, add run.sh\n\nSigned-off-by: Ada Lovelace <ada@example.org>")
    out = tmp_path / "outgoing"
    run("format-patch", "-q", "--cover-letter", "--thread", f"--base={base}", "-v2",
        "--subject-prefix=PATCH net-next", "-o", str(out), f"{base}..HEAD")
    series = load_series(str(out))
    assert (series.version, series.total, series.tree, series.base_commit) == (2, 2, "net-next", base)
    assert series.cover is not None and series.missing == []
    assert [p.subject for p in series.patches] == ["ring: add a tail", "tree: rename old.c, add run.sh"]
    assert series.patches[0].author == "Ada Lovelace <ada@example.org>"
    assert series.patches[0].trailers == ["Signed-off-by: Ada Lovelace <ada@example.org>"]
    assert sorted((f.path, f.status, f.old_path) for f in series.patches[1].files) == [
        ("new.c", "renamed", "old.c"), ("run.sh", "added", None)]
    run("checkout", "-q", base)
    for patch in series.patches:
        (tmp_path / "p.diff").write_text(patch.diff)
        run("apply", "--index", str(tmp_path / "p.diff"))
    assert (repo / "new.c").exists() and (repo / "ring.c").read_text() == "int ring;\nint tail;\n"


def test_mh_folder_numbered_files_in_numeric_order(tmp_path):
    """An MH folder: files 1..N without suffix; 10 must come after 9, not after 1."""
    for number in range(1, 13):
        (tmp_path / str(number)).write_bytes(b"From: x@example.org\nSubject: note %d\n\nnothing\n" % number)
    assert [m.subject for m in read_mails(str(tmp_path))] == [f"note {n}" for n in range(1, 13)]
