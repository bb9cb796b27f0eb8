"""Bytes in, text out: decode one raw message into a `Mail`, whatever its encodings; never raise.

Handles quoted-printable, base64, 8bit, CRLF line ends, folded headers, RFC 2047 encoded words in
any charset, raw 8-bit headers, bogus charsets and invalid bytes (replaced, never fatal).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import quopri
import re
from dataclasses import dataclass
from datetime import datetime
from email import message_from_bytes
from email.message import Message
from email.parser import BytesHeaderParser
from email.policy import compat32
from email.utils import parsedate_to_datetime


@dataclass(slots=True)
class Mail:
    """One decoded message; `text` is the readable body (text parts and patch attachments)."""

    position: int                  # order in the source, from 0
    message_id: str                # without angle brackets; "" when the mail has none
    in_reply_to: str | None
    references: list[str]
    subject: str
    from_name: str
    from_email: str
    date: datetime | None
    text: str
    recipients: str = ""           # To: and Cc: as sent, comma-joined (parsed only for the patches checked)
    raw: bytes = b""               # the message as read (line ends unified): what a signature covers

    @property
    def key(self) -> str:
        """Identity used for threading: the Message-Id, or the position when there is none."""
        return self.message_id or f"#{self.position}"

    @property
    def sender(self) -> str:
        return format_person(self.from_name, self.from_email)


_ENCODED_WORD = re.compile(r"=\?([^?\s]+)\?([QqBb])\?([^?]*)\?=")
_BETWEEN_ENCODED_WORDS = re.compile(r"(\?=)\s+(?==\?)")
_FOLD = re.compile(r"\r?\n(?=[ \t])")
_BRACKETED_ADDRESS = re.compile(r"<([^<>\s]*@[^<>\s]*)>")
_MSGID = re.compile(r"<([^<>\s]+)>")
_HEADER_PARSER = BytesHeaderParser(policy=compat32)
_SKIPPED_TYPES = ("application/pgp-signature", "application/pkcs7-signature", "text/html")
_PATCH_LIKE = re.compile(r"^(diff -|Index: |--- \S|Signed-off-by:)", re.MULTILINE)


def decode_mail(raw: bytes, position: int = 0) -> Mail:
    raw = unify_line_ends(raw)
    message = _parse(raw)
    headers: dict[str, list[str]] = {}
    for name, value in message.raw_items():
        headers.setdefault(name.lower(), []).append(_header_text(value))
    first = {name: values[0] for name, values in headers.items()}
    from_name, from_email = parse_person(first.get("from", ""))
    refs = [ref for value in headers.get("references", []) for ref in _MSGID.findall(value)]
    in_reply_to = next((ref for value in headers.get("in-reply-to", []) for ref in _MSGID.findall(value)), None)
    return Mail(
        position=position,
        message_id=_message_id(first.get("message-id", "")),
        in_reply_to=in_reply_to,
        references=refs,
        subject=decode_words(_collapse(first.get("subject", ""))),
        from_name=from_name,
        from_email=from_email,
        date=parse_date(first.get("date", "")),
        text=_body_text(message),
        recipients=", ".join(_collapse(value) for name in ("to", "cc") for value in headers.get(name, [])),
        raw=raw,
    )


def _parse(raw: bytes) -> Message:
    """The email package's reading of `raw`; for a single-part mail only the header block goes
    through its line-by-line parser and the body is attached as it stands, which is what the full
    parse would produce at a fraction of the cost."""
    head, blank, body = raw.partition(b"\n\n")
    if blank and head.strip():
        message = _HEADER_PARSER.parsebytes(head + b"\n\n")
        if not message.get_payload() and not _content_type(message).startswith(("multipart/", "message/")):
            message.set_payload(body.decode("ascii", "surrogateescape"))
            return message
    return message_from_bytes(raw, policy=compat32)


def unify_line_ends(data):
    """CRLF to LF when most lines end in CRLF (the mail was sent that way; a trailer added by a list
    or a tool may be LF-only). Otherwise leave it: a CR inside a line may be content."""
    crlf, lf = ("\r\n", "\n") if isinstance(data, str) else (b"\r\n", b"\n")
    if data.count(crlf) * 2 > data.count(lf):
        return data.replace(crlf, lf)
    return data


def parse_person(value: str) -> tuple[str, str]:
    """Name and address of a From-like header (unfolded, still RFC 2047 encoded), as git reads it.

    Everything around `<address>` is the name, comments included; quotes and escapes are removed.
    A bare `address (Name)` takes the comment as the name, a bare address is its own name.
    """
    value = _collapse(value)
    bracketed = _BRACKETED_ADDRESS.search(value)
    if bracketed:
        name = _unquote_name(_collapse(value[:bracketed.start()] + " " + value[bracketed.end():]))
        if re.fullmatch(r"\([^()]*\)", name):  # `<addr> (Name)`: the comment is the name
            name = name[1:-1].strip()
        return decode_words(name), bracketed.group(1)
    comment = re.search(r"\((.*)\)", value)
    bare = re.sub(r"\(.*\)", "", value).strip()
    if "@" not in bare:
        return "", ""
    name = _unquote_name(comment.group(1)) if comment else bare
    return decode_words(name.strip()) or bare, bare


def _unquote_name(text: str) -> str:
    """Drop the quotes of quoted strings (not those inside comments) and backslash escapes."""
    result, depth, escaped = [], 0, False
    for char in text:
        if escaped:
            result.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"' and depth == 0:
            continue
        else:
            depth += {"(": 1, ")": -1}.get(char, 0)
            result.append(char)
    return "".join(result).strip()


def format_person(name: str, email: str) -> str:
    if name and email:
        return f"{name} <{email}>"
    return name or (f"<{email}>" if email else "")


def parse_date(value: str) -> datetime | None:
    if not value.strip():
        return None
    try:
        return parsedate_to_datetime(_collapse(value))
    except Exception:  # malformed dates raise ValueError, TypeError, OverflowError or OSError
        return None


def decode_words(text: str) -> str:
    """Decode RFC 2047 encoded words; whitespace between two encoded words is dropped."""
    if "=?" not in text:
        return text
    return _ENCODED_WORD.sub(_decode_word, _BETWEEN_ENCODED_WORDS.sub(r"\1", text))


def _decode_word(match: re.Match) -> str:
    charset, encoding, payload = match.group(1).split("*")[0], match.group(2).upper(), match.group(3)
    try:
        if encoding == "Q":
            data = quopri.decodestring(payload.replace("_", " ").encode("ascii", "replace"), header=True)
        else:
            data = base64.b64decode(payload + "=" * (-len(payload) % 4))
    except (binascii.Error, ValueError):
        return match.group(0)
    return decode_bytes(data, charset)


def decode_bytes(data: bytes, charset: str | None) -> str:
    """Decode with the declared charset if Python knows it as a text codec, else UTF-8; never raise.

    8-bit text declared as us-ascii is nearly always UTF-8 sent by a mislabelling client: read as such.
    """
    if charset:
        try:
            codec = codecs.lookup(charset)
            if codec.name == "ascii" and not data.isascii():
                return data.decode("utf-8", errors="replace")
            if codec._is_text_encoding:
                return data.decode(charset, errors="replace")
        except (LookupError, UnicodeError, TypeError, ValueError):
            pass
    return data.decode("utf-8", errors="replace")


def _header_text(value) -> str:
    if not isinstance(value, str):
        value = str(value)
    # BytesParser keeps raw 8-bit header bytes as surrogates; those are nearly always UTF-8
    raw = value.encode("ascii", "surrogateescape") if not value.isascii() and _has_surrogates(value) else None
    text = raw.decode("utf-8", errors="replace") if raw is not None else value
    return _FOLD.sub("", text)


def _has_surrogates(value: str) -> bool:
    return any("\udc80" <= char <= "\udcff" for char in value)


def _collapse(value: str) -> str:
    return " ".join(value.split())


def _message_id(value: str) -> str:
    match = _MSGID.search(value)
    if match:
        return match.group(1)
    return value.strip().strip("<>").strip()


def _body_text(message: Message) -> str:
    parts = [part for part in message.walk() if not part.is_multipart()]
    has_plain = any(_content_type(part) == "text/plain" for part in parts)
    texts = []
    for part in parts:
        content_type = _content_type(part)
        if content_type in _SKIPPED_TYPES and (has_plain or content_type != "text/html"):
            continue
        text = unify_line_ends(decode_bytes(_payload_bytes(part), _charset(part)))
        if content_type.startswith("text/") or _PATCH_LIKE.search(text):
            texts.append(text)
    return "\n".join(text if text.endswith("\n") or not text else text + "\n" for text in texts)


def _content_type(part: Message) -> str:
    try:
        return part.get_content_type()
    except Exception:  # header values that are binary garbage
        return "text/plain"


def _charset(part: Message) -> str | None:
    try:
        charset = part.get_content_charset()
    except Exception:
        return None
    return charset if isinstance(charset, str) else None


def _payload_bytes(part: Message) -> bytes:
    try:
        data = part.get_payload(decode=True)
    except Exception:
        data = None
    if isinstance(data, bytes):
        return data
    payload = part.get_payload()
    if isinstance(payload, str):
        return payload.encode("ascii", "surrogateescape")
    return b""
