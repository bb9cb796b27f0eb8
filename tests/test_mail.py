"""Mail decoding and subject parsing, table-driven, plus mangled mail fed by hypothesis."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patchbench.errors import BadInput
from patchbench.mail import decode_mail
from patchbench.mail.content import message_trailers, reply_trailers
from patchbench.mail.sources import split_mbox
from patchbench.mail.subject import parse_subject
from patchbench.series import load_series

NETDEV = Path(__file__).resolve().parents[1] / "fixtures" / "mail" / "netdev-v1-v2.mbox"


@pytest.mark.parametrize("subject, title, version, index, total, tree, reply", [
    ("[PATCH net-next v7 3/9] tun: fix", "tun: fix", 7, 3, 9, "net-next", False),
    ("[PATCH v2 net 1/2] x", "x", 2, 1, 2, "net", False),
    ("[net,v2,1/2] y", "y", 2, 1, 2, "net", False),
    ("[RFC PATCH net-next 00/10] z", "z", 1, 0, 10, "net-next", False),
    ("PATCHv3 2/5: w", "w", 3, 2, 5, None, False),
    ("[PATCH 1 of 5] hg", "hg", 1, 1, 5, None, False),
    ("[PATCH RESEND v2] r", "r", 2, None, None, None, False),
    ("Re: [PATCH v2 1/3] a", "a", 2, 1, 3, None, True),
    ("Aw: Fwd: [PATCH] b", "b", 1, None, None, None, True),
    ("[Qemu-devel] [PATCH] quorum: Only", "quorum: Only", 1, None, None, None, False),
    ("[PATCH 3/3 v2] Xyzzy", "Xyzzy", 2, 3, 3, None, False),
    ("[Patch 2/2]: odd", "odd", 1, 2, 2, None, False),
    ("[PATCH [net] 1/2] nested", "nested", 1, 1, 2, "net", False),
    ("[PATCH V2 1/4] up", "up", 2, 1, 4, None, False),
    ("patch subject", "patch subject", 1, None, None, None, False),
])
def test_subject_prefixes(subject, title, version, index, total, tree, reply):
    parsed = parse_subject(subject)
    assert (parsed.title, parsed.version, parsed.index, parsed.total, parsed.tree, parsed.is_reply) == (
        title, version, index, total, tree, reply)


def test_rfc2047_folded_headers_and_bad_bytes():
    raw = (b"From: =?ISO-8859-1?Q?Andr=E9?=\n =?UTF-8?B?IFBpcmFyZA==?= <andre@example.org>\n"
           b"Subject: =?utf-8?q?caf=C3=A9?=\n =?utf-8?q?_cr=C3=A8me?= \xff raw\n"
           b"Date: Tue, 30 Aug 2022 11:19:07 -0400\nMessage-Id:\n <folded@id>\n"
           b"Content-Type: text/plain; charset=x-no-such-charset\n\nbody \xff\xfe text\n")
    mail = decode_mail(raw)
    assert mail.from_name == "André Pirard" and mail.from_email == "andre@example.org"
    assert mail.subject == "café crème \ufffd raw"
    assert mail.message_id == "folded@id"
    assert "body" in mail.text and "\ufffd" in mail.text


def test_base64_body_and_bogus_date():
    raw = (b"From: A <a@example.org>\nSubject: [PATCH] x\nDate: Wg>\nContent-Transfer-Encoding: base64\n\n"
           b"aGVsbG8gd29ybGQK\n")
    mail = decode_mail(raw)
    assert mail.text == "hello world\n" and mail.date is None


def test_mbox_body_from_line_is_not_a_separator():
    mbox = (b"From x Mon Sep 17 00:00:00 2001\nSubject: one\n\nFrom the start,\n>From quoted\n\n"
            b"From y Mon Sep 17 00:00:00 2001\nSubject: two\n\nbody\n")
    messages = list(split_mbox(mbox.splitlines(keepends=True)))
    assert len(messages) == 2 and b"From the start," in messages[0] and b">From quoted" in messages[0]


def test_trailer_blocks():
    message = "Subject line\n\nSome text: with a colon.\n\nReviewed-by: A <a@x>\n[note]\nSigned-off-by: B\n <b@x>\n"
    assert message_trailers(message) == ["Reviewed-by: A <a@x>", "Signed-off-by: B <b@x>"]
    assert message_trailers("Just prose.\nNot: a trailer block because\nof this line\n") == []
    assert message_trailers("x\n\nNote: said in passing\n") == []   # no well-known trailer kind
    picked = "x\n\nSigned-off-by: A <a@x>\n(cherry picked from commit 0123abcd)\nSigned-off-by: B <b@x>\n"
    assert message_trailers(picked) == ["Signed-off-by: A <a@x>", "Signed-off-by: B <b@x>"]
    reply = "> Reviewed-by: Q <q@x>\nReviewed-by: R <r@x>\nTested-by: Other <o@x>\n-- \nAcked-by: R <r@x>\n"
    assert reply_trailers(reply, "r@x") == ["Reviewed-by: R <r@x>"]


_TEMPLATE = NETDEV.read_bytes()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mangled_mail_gives_result_or_bad_input(tmp_path, data):
    """Cut, splice, flip and inject bytes anywhere in a real-shaped mailbox: nothing but clean outcomes."""
    raw = bytearray(_TEMPLATE)
    for _ in range(data.draw(st.integers(0, 6))):
        operation = data.draw(st.sampled_from(["cut", "insert", "flip", "delete", "dup"]))
        at = data.draw(st.integers(0, len(raw)))
        if operation == "cut":
            del raw[at:]
        elif operation == "insert":
            raw[at:at] = data.draw(st.sampled_from([
                b"\r\n", b"=?utf-8?b?////?=", b"\xff\xfe\x00", b"\n\nFrom x Mon Sep 17 00:00:00 2001\n",
                b"Content-Transfer-Encoding: base64\n", b"Content-Type: multipart/mixed; boundary=x\n",
                b"@@ -1,99 +1,2 @@\n", b"diff --git a/x b/x\n", b"In-Reply-To: <v2-1@example.org>\n",
                b"charset=\"u  d\"", b"[PATCH v999999999999 0/0]"])) + data.draw(st.binary(max_size=20))
        elif operation == "flip" and raw:
            raw[min(at, len(raw) - 1)] ^= data.draw(st.integers(1, 255))
        elif operation == "delete":
            del raw[at:at + data.draw(st.integers(1, 200))]
        elif operation == "dup":
            raw[at:at] = raw[at:at + data.draw(st.integers(1, 400))]
    source = tmp_path / "mangled.mbox"
    source.write_bytes(bytes(raw))
    try:
        series = load_series(str(source))
    except BadInput as error:
        assert str(error)
    else:
        assert series.patches and all(p.diff for p in series.patches)


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=3000))
def test_any_bytes_decode_without_exception(raw):
    """Arbitrary bytes as one message and as an mbox: decoding always yields text, never raises."""
    mail = decode_mail(raw)
    assert isinstance(mail.text, str) and isinstance(mail.subject, str)
    for message in split_mbox(raw.splitlines(keepends=True)):
        assert isinstance(decode_mail(message).text, str)


def test_long_runs_of_spaces_are_read_in_linear_time():
    """A mangled reply with a huge run of spaces inside a trailer must not stall the reader."""
    value = "Bob" + " " * 200_000 + "<bob@example.com>"
    assert reply_trailers(f"Reviewed-by: {value}   \n", "bob@example.com") == [f"Reviewed-by: {value}"]


def test_utf8_mislabelled_as_ascii_is_kept():
    raw = ("From: A <a@example.org>\nSubject: [PATCH] x\nContent-Type: text/plain; charset=us-ascii\n"
           "Content-Transfer-Encoding: 8bit\n\n+M:\tJosé Müller <jm@example.org>\n").encode()
    assert "José Müller" in decode_mail(raw).text


def test_lore_mboxrd_separator_unescapes_from_lines():
    lore = b"From mboxrd@z Thu Jan  1 00:00:00 1970\nSubject: a\n\n>From the start\n"
    mboxo = b"From x@y Thu Jan  1 00:00:00 1970\nSubject: a\n\n>From the start\n"
    assert b"\nFrom the start" in next(split_mbox(lore.splitlines(keepends=True)))
    assert b"\n>From the start" in next(split_mbox(mboxo.splitlines(keepends=True)))
