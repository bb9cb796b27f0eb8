"""Read the text of a mail: in-body headers, commit message vs diff, trailers, base information."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# the value ends at its last non-space (written so that long runs of spaces cost linear time)
_TRAILER = re.compile(r"^([A-Za-z][A-Za-z0-9-]*[A-Za-z0-9]):[ \t]+(\S(?:.*\S)?)\s*$")
_WELL_KNOWN_KEY = re.compile(r"^([a-z0-9-]+-by|fixes|link|closes|cc|change-id|bug|buglink):", re.IGNORECASE)
_REPLY_TRAILER_KEY = re.compile(r"^([a-z0-9-]+-by|fixes|closes|link)$", re.IGNORECASE)
_EMAIL = re.compile(r"<[^<>@\s]+@[^<>\s]+>")
_PLUS_TAG = re.compile(r"\+[^@]+@")
_WRAPPED_ADDRESS = re.compile(r"^([ \t]*[A-Za-z][A-Za-z0-9-]*-by:[ \t]+[^<\n]*[^<\s])[ \t]*\n[ \t]*(<[^<>\s]+@[^<>\s]+>)[ \t]*$",
                              re.MULTILINE | re.IGNORECASE)
_WRAPPED_FIXES = re.compile(r"^([ \t]*Fixes:[ \t]+[0-9a-f]{7,40}[ \t]+\([^)\n]+)\n[ \t]*([^\n]*\))[ \t]*$",
                            re.MULTILINE | re.IGNORECASE)
_INBODY_HEADER = re.compile(r"^(From|Subject|Date):\s*(.*)$", re.IGNORECASE)
_FORWARDED_FROM = re.compile(r"^>?From [0-9a-f]{40} ")
_HUNK = re.compile(r"^@@+ -\d")
_GIT_EXTENDED = re.compile(
    r"^(old mode|new mode|deleted file mode|new file mode|rename from|rename to|copy from|copy to"
    r"|similarity index|dissimilarity index|index [0-9a-f]+\.\.|GIT binary patch|Binary files )"
)
_BASE_COMMIT = re.compile(r"^base-commit:\s*([0-9a-f]{7,64})\s*$", re.MULTILINE)
_PREREQ_PATCH = re.compile(r"^prerequisite-patch-id:\s*([0-9a-f]{7,64})\s*$", re.MULTILINE)
_CHANGE_ID = re.compile(r"^change-id:\s*(\S+)\s*$", re.MULTILINE)
_PREREQ_CHANGE = re.compile(r"^prerequisite-change-id:\s*(\S+)\s*$", re.MULTILINE)
_PREREQ_MESSAGE = re.compile(r"^prerequisite-message-id:\s*<?([^<>\s]+)>?\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class InBody:
    """`From:`/`Subject:`/`Date:` lines at the top of a body override the mail headers (git am)."""

    author: str | None = None
    subject: str | None = None
    date: str | None = None


_NO_INBODY = InBody()   # shared by the many mails without in-body headers; never modified


@dataclass
class PatchText:
    message: str                   # commit message: everything above the `---` (or the diff)
    diff: str                      # from the first diff header to the end; "" for no diff
    inbody: InBody = _NO_INBODY
    notes: str = ""                # between the `---` and the diff: changelog, diffstat


def split_patch(text: str) -> PatchText:
    lines = text.splitlines(keepends=True)
    inbody, start = _inbody_headers(lines)
    lines = lines[start:]
    message_end = next((i for i, line in enumerate(lines) if _is_patch_break(line)), len(lines))
    diff_start = _diff_start(lines, message_end)
    if diff_start is None:
        return PatchText(message="".join(lines[:message_end]).strip("\n") + "\n", diff="", inbody=inbody)
    notes = "".join(lines[message_end + 1:diff_start]) if message_end < diff_start else ""
    message_end = min(message_end, diff_start)
    return PatchText(
        message="".join(lines[:message_end]).strip("\n") + "\n",
        diff="".join(lines[diff_start:]),
        inbody=inbody,
        notes=notes,
    )


def _inbody_headers(lines: list[str]) -> tuple[InBody, int]:
    position = 0
    while position < len(lines) and not lines[position].strip():
        position += 1
    if position < len(lines) and _FORWARDED_FROM.match(lines[position]):
        position += 1
    found: dict[str, str] = {}
    if position < len(lines) and lines[position].startswith("[PATCH"):
        found["subject"] = lines[position].strip()  # git takes a leading "[PATCH] ..." line as the subject
        position += 1
    while position < len(lines):
        header = _INBODY_HEADER.match(lines[position].rstrip("\n"))
        if not header:
            break
        value = header.group(2)
        position += 1
        while position < len(lines) and lines[position][:1] in (" ", "\t") and lines[position].strip():
            value += " " + lines[position].strip()
            position += 1
        found.setdefault(header.group(1).lower(), value.strip())
    if not found:
        return _NO_INBODY, 0
    return InBody(found.get("from"), found.get("subject"), found.get("date")), position


def _is_patch_break(line: str) -> bool:
    """git mailinfo's rule: `diff -`, `Index: `, `--- <name>`, or a `---` of its own."""
    if line.startswith(("diff -", "Index: ")):
        return True
    if line.startswith("---"):
        rest = line[3:].rstrip("\n")
        return not rest.strip() or (rest[:1] == " " and not rest[1:2].isspace() and rest[1:2] != "")
    return False


def _diff_start(lines: list[str], search_from: int) -> int | None:
    """Index of the first diff header line at or after `search_from`, if a real diff follows."""
    for i in range(search_from, len(lines)):
        line = lines[i]
        if line.startswith("diff -") or line.startswith("Index: "):
            if _diff_body_follows(lines, i + 1):
                return i
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            if i + 2 < len(lines) and _HUNK.match(lines[i + 2]):
                return i
    return None


def _diff_body_follows(lines: list[str], start: int) -> bool:
    for line in lines[start:start + 8]:
        if _HUNK.match(line) or _GIT_EXTENDED.match(line):
            return True
        if line.startswith("--- ") or line.startswith("+++ ") or line.startswith("====="):
            continue
        if not line.startswith("diff "):
            return False
    return False


def message_trailers(message: str) -> list[str]:
    """Trailers of a commit message: its last paragraph, when that paragraph is made of trailers.

    Lines in `[...]`, starting with `#`, or other odd lines such as "(cherry picked from ...)" are
    annotations and skipped; an indented line, or one holding just the `<address>`, continues the
    trailer above it (a wrapped Signed-off-by is joined). Prose is not a trailer block: at least
    half of the lines must be trailers, one of them a well-known kind.
    """
    paragraphs = [p for p in re.split(r"\n[ \t]*\n", message.strip("\n")) if p.strip()]
    if not paragraphs:
        return []
    lines = paragraphs[-1].splitlines()
    trailers: list[str] = []
    for line in lines:
        stripped = line.strip()
        match = _TRAILER.match(line)
        if match and not line[:1].isspace():
            trailers.append(f"{match.group(1)}: {match.group(2)}")
        elif trailers and (line[:1].isspace() or stripped.startswith("<")) and not stripped.startswith("["):
            trailers[-1] = f"{trailers[-1]} {stripped}"
    if len(trailers) * 2 < len(lines) or not any(_WELL_KNOWN_KEY.match(t) for t in trailers):
        return []
    return trailers


def reply_trailers(text: str, sender_email: str, sender_name: str = "") -> list[str]:
    """Trailers a reviewer gave in a reply: unquoted `*-by:`, Fixes, Closes, Link.

    As b4 does, a `*-by:` trailer counts only when it names the reply's sender (same address, or
    the same name when writing from another address): a reviewer cannot give someone else's
    Reviewed-by, and this keeps pasted trailer blocks out.
    """
    found = []
    for line in _join_wrapped_trailers(text).splitlines():
        if line.rstrip() == "--" or line == "-- ":
            break  # signature
        match = _TRAILER.match(line.strip()) if not line.lstrip().startswith(">") else None
        if not match or not _REPLY_TRAILER_KEY.match(match.group(1)):
            continue
        if match.group(1).lower().endswith("-by") and not _names_sender(match.group(2), sender_email, sender_name):
            continue
        found.append(f"{match.group(1)}: {_clean_html_junk(match.group(2))}")
    return found


def _join_wrapped_trailers(text: str) -> str:
    """A mail client's line wrap put back: `Reviewed-by: Name` + a next line of just `<address>`, and a
    `Fixes: sha ("subject` whose closing `")` went to the next line."""
    text = _WRAPPED_ADDRESS.sub(r"\1 \2", text)
    return _WRAPPED_FIXES.sub(r"\1 \2", text)


def same_person_address(given: str, sender: str) -> bool:
    """Two addresses of one person, as b4 judges it: equal, equal without a `+tag`, or the same
    mailbox at a domain one level above or below (jo@intel.com, jo@linux.intel.com)."""
    given, sender = given.lower(), sender.lower()
    if given == sender:
        return True
    if "@" not in given or "@" not in sender:
        return False
    given, sender = _PLUS_TAG.sub("@", given), _PLUS_TAG.sub("@", sender)
    if given == sender:
        return True
    given_local, given_domain = given.split("@", 1)
    sender_local, sender_domain = sender.split("@", 1)
    if given_local != sender_local or abs(given_domain.count(".") - sender_domain.count(".")) != 1:
        return False
    return given_domain.endswith("." + sender_domain) or sender_domain.endswith("." + given_domain)


def _names_sender(person: str, sender_email: str, sender_name: str) -> bool:
    address = _EMAIL.search(_clean_html_junk(person))
    if not address:
        return False
    if same_person_address(address.group(0)[1:-1], sender_email):
        return True
    name = " ".join(person[:address.start()].replace('"', " ").split()).lower()
    return bool(name) and name == " ".join(sender_name.replace('"', " ").split()).lower()


def _clean_html_junk(value: str) -> str:
    """`Name <a@b<mailto:a@b>>` as some mail clients mangle it, back to `Name <a@b>`."""
    return re.sub(r"<([^<>\s]+)<mailto:\1>>", r"<\1>", value)


@dataclass
class BaseInfo:
    base_commit: str | None = None
    prerequisite_patch_ids: list[str] = field(default_factory=list)
    change_id: str | None = None
    prerequisite_change_ids: list[str] = field(default_factory=list)     # b4: "<change-id>:v<N>"
    prerequisite_message_ids: list[str] = field(default_factory=list)


def base_info(texts: list[str]) -> BaseInfo:
    """base-commit / change-id (first seen wins, cover letter first) and prerequisite-* lines (all)."""
    info = BaseInfo()
    for text in texts:
        if info.base_commit is None and (match := _BASE_COMMIT.search(text)):
            info.base_commit = match.group(1)
        if info.change_id is None and (match := _CHANGE_ID.search(text)):
            info.change_id = match.group(1)
        for pattern, found in ((_PREREQ_PATCH, info.prerequisite_patch_ids),
                               (_PREREQ_CHANGE, info.prerequisite_change_ids),
                               (_PREREQ_MESSAGE, info.prerequisite_message_ids)):
            found.extend(value for value in pattern.findall(text) if value not in found)
    return info
