"""signoff: the author signed the patch off, and the chain of Signed-off-by: lines is sane.

The author (in-body From:, else the mail's From:) must have a Signed-off-by: whose name or address
is theirs once both go through the base tree's .mailmap. No person signs twice. When someone else
sends the patch, the sender signs off too, last (they are the last to handle it).
"""

from __future__ import annotations

from patchbench.checks.engine.finding import Finding
from patchbench.patchchecks.context import PatchContext, message_finding

ID = "signoff"
MESSAGE = "the author's Signed-off-by is present; no duplicate; the sender's is last"
NEEDS = ()


def _signers(trailers: list[str]) -> list[str]:
    return [t.split(":", 1)[1].strip() for t in trailers if t.lower().startswith("signed-off-by:")]


def _same(a: tuple[str, str], b: tuple[str, str]) -> bool:
    return bool((a[1] and a[1] == b[1]) or (a[0] and a[0] == b[0]))


def run(context: PatchContext) -> list[Finding]:
    found = []
    for patch in context.applied.applied:
        mail = context.mail(patch)
        if mail is None:
            continue
        signers = _signers(context.trailers(patch))
        people = context.canonical([mail.author, mail.sender or mail.author, *signers])
        author, sender = people[mail.author], people[mail.sender or mail.author]
        chain = [people[s] for s in signers]

        def say(severity: str, message: str) -> None:
            found.append(message_finding(ID, severity, message, patch.index))

        if not signers:
            say("error", f"no Signed-off-by: at all (the author is {mail.author})")
            continue
        if not any(_same(author, signer) for signer in chain):
            say("error", f"no Signed-off-by: from the author {mail.author}")
        seen: list[tuple[str, str]] = []
        for signer, person in zip(signers, chain):
            if any(_same(person, earlier) for earlier in seen):
                say("warning", f"Signed-off-by: {signer} appears more than once")
            seen.append(person)
        if not _same(sender, author):
            if not any(_same(sender, signer) for signer in chain):
                say("error", f"the sender {mail.sender} did not sign off a patch written by {mail.author}")
            elif not _same(sender, chain[-1]):
                say("warning", f"the sender {mail.sender} signs off, but not last")
    return found
