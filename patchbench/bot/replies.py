"""Reply mail to the list, 0-day-robot style: plain text, threaded under the patch, failures only.

One mail per patch with failing results (the findings, file:line and the code line), and one per
series for series-level failures (does not apply, boot), threaded under the cover letter (or the
first patch when there is none). The Message-Id is derived from the series, the patch and the
failing results, so the same result always makes the same mail: the outbox keeps one row per
Message-Id, and a maildir (the dry run) is never written twice for one.
"""

from __future__ import annotations

import hashlib
import os
import smtplib
from email.message import EmailMessage
from email.policy import SMTP
from email import message_from_string
from email.utils import formatdate, parseaddr
from pathlib import Path

SIGNATURE = "-- \npatchbench CI bot"
# Headers unfolded: a folded In-Reply-To (a long Message-Id) comes back with a leading blank from
# some parsers, and list tools match it as text.
POLICY = SMTP.clone(max_line_length=998)


def compose(outcome: dict, sender: str, extra_to: list[str], pages_url_of) -> list[tuple[str, str]]:
    """(Message-Id, message text) of each reply the outcome calls for; `pages_url_of(patch_id or None)`."""
    patches = {p["id"]: p for p in outcome["patches"]}
    mails = []
    targets = [None] + [p["id"] for p in outcome["patches"]]
    for target in targets:
        failing = [r for r in outcome["results"] if r["patch"] == target and r["state"] == "fail"]
        if not failing or not outcome["patches"]:
            continue
        if target is None:
            parent = outcome["cover"] or outcome["patches"][0]
        else:
            parent = patches[target]
        mails.append(_message(outcome, parent, failing, sender, extra_to, pages_url_of(target)))
    return mails


def _message(outcome: dict, parent: dict, failing: list[dict], sender: str, extra_to: list[str],
             url: str | None) -> tuple[str, str]:
    digest = hashlib.sha256(repr([(r["stage"], r["patch"], r["description"], r.get("findings"))
                                  for r in failing]).encode()).hexdigest()[:16]
    domain = parseaddr(sender)[1].partition("@")[2] or "patchbench.invalid"
    message_id = f"<patchbench-{outcome['id']}-{parent['id']}-{digest}@{domain}>"
    submitter = outcome.get("submitter") or {}
    msg = EmailMessage(policy=POLICY)
    msg["From"] = sender
    to = [f"{submitter.get('name') or ''} <{submitter['email']}>".strip()] if submitter.get("email") else []
    msg["To"] = ", ".join(to + list(extra_to)) or sender
    subject = parent["name"]
    msg["Subject"] = subject if subject.lower().startswith("re:") else f"Re: {subject}"
    msg["Date"] = formatdate(localtime=False)
    msg["Message-Id"] = message_id
    parent_id = parent["msgid"] if parent["msgid"].startswith("<") else f"<{parent['msgid']}>"
    msg["In-Reply-To"] = parent_id
    msg["References"] = parent_id
    msg["X-Patchbench-Series"] = str(outcome["id"])
    msg.set_content(_body(outcome, failing, submitter, url), charset="utf-8", cte="8bit")
    return message_id, msg.as_string()


def _body(outcome: dict, failing: list[dict], submitter: dict, url: str | None) -> str:
    first_name = (submitter.get("name") or "").split(" ")[0]
    lines = [f"Hi {first_name}," if first_name else "Hi,", "",
             f"patchbench tested \"{outcome['name']}\" (patchwork series {outcome['id']}, "
             f"v{outcome['version']}) and found the following.", ""]
    for result in failing:
        lines.append(f"[{result['stage']}] {result['description']}")
        if result.get("reason"):
            lines += ["", *("    " + line for line in result["reason"].splitlines())]
        for finding in result.get("findings", []):
            lines.append(f"{finding['file']}:{finding['line']}: {finding['severity']}: {finding['rule']}: "
                         f"{finding['message']} (in {finding['function']}())")
            lines.append(f"  {finding['line']:>5} | {finding['code']}")
        for warning in result.get("warnings", []):
            lines.append(f"{warning['file']}:{warning['line']}: {warning['kind']}: {warning['message']}")
        if result.get("excerpt"):
            lines += ["", "Console:", *("    " + line for line in result["excerpt"].splitlines()[:20])]
        lines.append("")
    msgid = (outcome["cover"] or outcome["patches"][0])["msgid"].strip("<>")
    base = f" --base {outcome['base'][:12]}" if outcome.get("base") else ""
    lines += ["How to reproduce (in a kernel git tree that has the base):", "",
              f"    patchbench check {msgid} --tree .{base}", ""]
    if url:
        lines += [f"Details: {url}", ""]
    lines += ["If you fix the issue, kindly add the tag Reported-by: patchbench CI bot where appropriate.",
              "", SIGNATURE]
    return "\n".join(lines) + "\n"


class SmtpSender:
    def __init__(self, host: str, port: int, timeout: float = 60.0):
        self.host, self.port, self.timeout = host, port, timeout

    def send(self, message_id: str, text: str, accepted) -> None:
        """Send; `accepted()` is called as soon as the server has taken the mail, before QUIT, so that
        the outbox records it within moments of the one point after which a resend would double it."""
        msg = message_from_string(text, policy=POLICY)
        with smtplib.SMTP(self.host, self.port, timeout=self.timeout) as smtp:
            smtp.send_message(msg)
            accepted()


class MaildirSender:
    """The dry run: each mail becomes one file in a maildir (new/), named after its Message-Id."""

    def __init__(self, root: Path):
        self.root = root
        for sub in ("tmp", "new", "cur"):
            (root / sub).mkdir(parents=True, exist_ok=True)

    def send(self, message_id: str, text: str, accepted) -> None:
        name = "patchbench-" + hashlib.sha256(message_id.encode()).hexdigest()[:32]
        if not any(any((self.root / sub).glob(name + "*")) for sub in ("new", "cur")):
            scratch = self.root / "tmp" / name   # (else written before a restart: never there twice)
            scratch.write_text(text, encoding="utf-8")
            os.replace(scratch, self.root / "new" / name)
        accepted()

