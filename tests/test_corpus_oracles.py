"""Our reader against the peers' exact oracles: b4's trailer outputs and git mailinfo's info/msg/patch.

Each source reports the share of oracle cases we match; the floors below are what we measured, so a
regression shows up as a failure with the list of cases that stopped matching. Run this module
directly (`python -m tests.test_corpus_oracles`) to print the shares.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from patchbench.mail import decode_mail, read_mails
from patchbench.mail.content import message_trailers, split_patch
from patchbench.mail.decode import parse_person
from patchbench.mail.sources import iter_raw_messages
from patchbench.mail.subject import parse_subject
from patchbench.series import load_series

APPLIER = "test-override@example.com"   # b4's test harness adds this Signed-off-by when applying


def b4_ref_cases(corpus: Path):
    """b4's `-ref-defaults` outputs: the trailers b4 collects per patch with default settings."""
    for ref in sorted((corpus / "b4" / "samples").glob("*-ref-defaults.txt")):
        source = ref.with_name(ref.name.split("-ref-")[0] + ".mbox")
        expected = [[t for t in message_trailers(split_patch(m.text).message) if APPLIER not in t]
                    for m in read_mails(str(ref))]
        got = [p.trailers for p in load_series(str(source)).patches]
        yield ref.name, expected == got, f"expected {expected}, got {got}"


def b4_verify_cases(corpus: Path):
    """b4's `.verify` files: `git log` (newest first) of the applied series: author mail, subject, body."""
    samples = corpus / "b4" / "samples"
    for verify, source in [
        ("trailers-thread-with-followups.verify", "trailers-thread-with-followups.mbox"),
        ("trailers-thread-with-cover-followup.verify", "trailers-thread-with-cover-followup.mbox"),
        ("shazam-git1-just-series-defaults.verify", "shazam-git1-just-series.mbox"),
    ]:
        commits = [c for c in (samples / verify).read_text().split("\n---\n") if c.strip()][::-1]
        expected = []
        for commit in commits:
            email, subject, body = commit.strip("\n").split("\n", 2)
            if "@" in subject and " " not in subject:  # a committer line comes before the subject
                subject, body = body.split("\n", 1)
            trailers = [t for t in message_trailers(body) if APPLIER not in t]
            expected.append((email, subject, trailers))
        series = load_series(str(samples / source))
        got = [(parse_person(p.author)[1], p.subject, p.trailers) for p in series.patches]
        yield verify, expected == got, f"expected {expected}, got {got}"


def _mailinfo_view(raw: bytes) -> dict[str, str]:
    """What `git mailinfo -u` prints, computed with our own decoding."""
    mail = decode_mail(raw)
    text = split_patch(mail.text)
    name, email = mail.from_name, mail.from_email
    if text.inbody.author:
        name, email = parse_person(text.inbody.author)
    subject = text.inbody.subject or mail.subject
    return {
        "Author": name,
        "Email": email,
        "Subject": parse_subject(subject).title,
        "msg": text.message.strip("\n"),
        "patch": text.diff,
    }


def _read_info(path: Path) -> dict[str, str]:
    fields = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if ": " in line:
            key, value = line.split(": ", 1)
            fields[key] = value.strip()
    return fields


def _oracle_text(path: Path) -> str:
    """git writes the patch in the mail's own charset; the oracles are UTF-8 or Latin-1."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _diff_part(patch_text: str) -> str:
    match = re.search(r"^(diff -|Index: |--- \S)", patch_text, re.MULTILINE)
    return patch_text[match.start():] if match else ""


def _header_cases(case: str, view: dict[str, str], info: dict[str, str]):
    for key in ("Author", "Email", "Subject"):
        if key in info:
            yield f"{case}:{key}", view[key] == info[key], f"{view[key]!r} != {info[key]!r}"


def git_mailinfo_cases(corpus: Path):
    """git t5100: each message of sample.mbox against info/msg/patch, field by field."""
    t5100 = corpus / "git" / "t5100"
    for number, raw in enumerate(iter_raw_messages(str(t5100 / "sample.mbox")), start=1):
        view = _mailinfo_view(raw)
        yield from _header_cases(f"info{number:04d}", view, _read_info(t5100 / f"info{number:04d}"))
        msg = (t5100 / f"msg{number:04d}").read_text(encoding="utf-8", errors="replace").strip("\n")
        yield f"msg{number:04d}", view["msg"] == msg, f"{view['msg']!r} != {msg!r}"
        patch = _diff_part(_oracle_text(t5100 / f"patch{number:04d}"))
        yield f"patch{number:04d}", view["patch"] == patch, f"{view['patch'][:200]!r} != {patch[:200]!r}"
    for number, raw in enumerate(iter_raw_messages(str(t5100 / "rfc2047-samples.mbox")), start=1):
        view = _mailinfo_view(raw)
        yield from _header_cases(f"rfc2047-{number:04d}", view, _read_info(t5100 / f"rfc2047-info-{number:04d}"))
    for name in ("info-from", "quoted-string", "comment", "embed-from"):
        view = _mailinfo_view((t5100 / f"{name}.in").read_bytes())
        yield from _header_cases(name, view, _read_info(t5100 / f"{name}.expect"))


def git_mboxrd_cases(corpus: Path):
    t5100 = corpus / "git" / "t5100"
    for number, mail in enumerate(read_mails(str(t5100 / "sample.mboxrd")), start=1):
        expected = (t5100 / f"{number:04d}mboxrd").read_text()
        yield f"{number:04d}mboxrd", mail.text.strip("\n") == expected.strip("\n"), repr(mail.text)


SOURCES = {
    # source: (cases, the share we measured and must keep)
    "b4 trailer refs (defaults)": (b4_ref_cases, 1.0),
    "b4 applied-series verify": (b4_verify_cases, 1.0),
    "git mailinfo t5100": (git_mailinfo_cases, 0.97),
    "git mailsplit mboxrd": (git_mboxrd_cases, 1.0),
}


def shares(corpus: Path) -> dict[str, tuple[int, int, list[str]]]:
    result = {}
    for source, (cases, _) in SOURCES.items():
        outcomes = list(cases(corpus))
        failed = [f"{name}: {detail}" for name, ok, detail in outcomes if not ok]
        result[source] = (len(outcomes) - len(failed), len(outcomes), failed)
    return result


@pytest.mark.parametrize("source", list(SOURCES))
def test_oracle_share_does_not_regress(corpus, source):
    cases, floor = SOURCES[source]
    outcomes = list(cases(corpus))
    assert outcomes, f"no oracle cases found for {source}"
    failed = [f"{name}: {detail}" for name, ok, detail in outcomes if not ok]
    share = 1 - len(failed) / len(outcomes)
    assert share >= floor, f"{source}: {share:.0%} match, below {floor:.0%}:\n" + "\n".join(failed)


if __name__ == "__main__":
    from tests.conftest import CORPUS

    for source, (matched, total, failed) in shares(CORPUS).items():
        print(f"{source}: {matched}/{total} = {matched / total:.0%}")
        if "-v" in sys.argv:
            for line in failed:
                print("   ", line[:300])
