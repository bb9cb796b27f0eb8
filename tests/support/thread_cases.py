"""Mailboxes shaped like the netdev threads where series reading used to go wrong, written here.

Each case is a list of raw messages and what a maintainer expects to get out of it. The same
mailboxes are read by tests/test_series_threads.py (our reading) and bench/b4_agreement.py (side by
side with b4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

ADA = "Ada Lovelace <ada@example.org>"
BOB = "Bob Reviewer <bob@example.com>"
CAROL = "Carol Maintainer <carol@example.net>"
REVIEWED = f"Reviewed-by: {BOB}"
ACKED = f"Acked-by: {CAROL}"
TESTED = f"Tested-by: {BOB}"
_START = datetime(2025, 3, 3, 9, 0, tzinfo=timezone.utc)
TITLES = {1: "ringbuf: mask the head index in ring_pop()", 2: "ringbuf: stop the queue when full",
          3: "ringbuf: count dropped packets"}


@dataclass
class Case:
    name: str
    messages: list[bytes]
    expected: str                                   # what a maintainer expects, in words
    # per patch index: trailers other than Signed-off-by that the series must carry
    trailers: dict[int, list[str]] = field(default_factory=dict)
    message_ids: list[str] = field(default_factory=list)   # of the patches chosen, in order
    error: str | None = None                         # for input that must be refused

    def mbox(self) -> bytes:
        if self.error:
            return b"".join(self.messages)   # as the user has it: no mbox separator either
        return b"".join(b"From mboxrd@z Thu Jan  1 00:00:00 1970\n" + m + b"\n" for m in self.messages)


def message(msgid: str, subject: str, sender: str, minutes: int, body: str, reply_to: str | None = None,
            references: tuple[str, ...] = ()) -> bytes:
    date = (_START + timedelta(minutes=minutes)).strftime("%a, %d %b %Y %H:%M:%S +0000")
    headers = [f"From: {sender}", f"Subject: {subject}", f"Date: {date}", f"Message-Id: <{msgid}>"]
    if reply_to:
        headers.append(f"In-Reply-To: <{reply_to}>")
        headers.append("References: " + " ".join(f"<{ref}>" for ref in (*references, reply_to)))
    headers += ["MIME-Version: 1.0", "Content-Type: text/plain; charset=utf-8"]
    return ("\n".join(headers) + "\n\n" + body).encode()


def diff(index: int, variant: str = "", line: int = 10) -> str:
    """A one-hunk change to drivers/net/ring<index>.c; `line` moves the hunk (patch-id unchanged)."""
    return (f"diff --git a/drivers/net/ring{index}.c b/drivers/net/ring{index}.c\n"
            f"index 1111111..2222222 100644\n"
            f"--- a/drivers/net/ring{index}.c\n+++ b/drivers/net/ring{index}.c\n"
            f"@@ -{line},3 +{line},3 @@ static int ring{index}_pop(struct ring *r)\n"
            f" \tspin_lock(&r->lock);\n-\tv = r->buf[r->head];\n+\tv = r->buf[r->head & r->mask{variant}];\n"
            f" \tspin_unlock(&r->lock);\n")


def patch_body(index: int, variant: str = "", line: int = 10, wording: str = "") -> str:
    return (f"ring{index}_pop() must not read past the buffer{wording}.\n\nSigned-off-by: {ADA}\n---\n"
            f" drivers/net/ring{index}.c | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n\n"
            + diff(index, variant, line) + "-- \n2.39.2\n")


def posting(tag: str, version: int, minutes: int, prefix: str = "PATCH", variants: dict[int, str] | None = None,
            lines: dict[int, int] | None = None, wording: str = "") -> list[bytes]:
    """A cover letter and three patches answering it, as git send-email threads them."""
    v = f" v{version}" if version > 1 else ""
    cover = f"{tag}-0@example.org"
    mails = [message(cover, f"[{prefix}{v} 0/3] ringbuf: fix ring_pop", ADA, minutes,
                     "Three fixes to the toy ring buffer.\n\nAda Lovelace (3):\n  ...\n\n"
                     " 3 files changed, 3 insertions(+), 3 deletions(-)\n\n-- \n2.39.2\n")]
    for i in (1, 2, 3):
        body = patch_body(i, (variants or {}).get(i, ""), (lines or {}).get(i, 10), wording)
        mails.append(message(f"{tag}-{i}@example.org", f"[{prefix}{v} {i}/3] {TITLES[i]}", ADA, minutes + i,
                             body, reply_to=cover))
    return mails


def reply(msgid: str, to: str, subject: str, sender: str, minutes: int, text: str, root: str | None = None) -> bytes:
    return message(msgid, f"Re: {subject}", sender, minutes, f"On Monday, someone wrote:\n> a quoted line\n\n{text}\n",
                   reply_to=to, references=(root,) if root and root != to else ())


def cases() -> list[Case]:
    v1, v2 = "[PATCH", "[PATCH v2"
    duplicate = Case(
        "resend-of-2-of-3-in-the-thread",
        posting("dup", 1, 0) + [
            reply("dup-r2@example.com", "dup-2@example.org", f"{v1} 2/3] {TITLES[2]}", BOB, 20, REVIEWED,
                  "dup-0@example.org"),
            message("dup-2b@example.org", f"{v1} 2/3] {TITLES[2]}", ADA, 30, patch_body(2, " + 0"),
                    reply_to="dup-0@example.org"),
            reply("dup-r2b@example.net", "dup-2b@example.org", f"{v1} 2/3] {TITLES[2]}", CAROL, 40, ACKED,
                  "dup-0@example.org"),
        ],
        "three patches and the cover; part 2 is the newer copy and keeps the review of the first copy",
        trailers={1: [], 2: [REVIEWED, ACKED], 3: []},
        message_ids=["dup-1@example.org", "dup-2b@example.org", "dup-3@example.org"],
    )
    resend = Case(
        "same-version-resend",
        posting("first", 2, 0) + [
            reply("first-r1@example.com", "first-1@example.org", f"{v2} 1/3] {TITLES[1]}", BOB, 20, REVIEWED,
                  "first-0@example.org"),
            reply("first-r0@example.net", "first-0@example.org", f"{v2} 0/3] ringbuf: fix ring_pop", CAROL, 25,
                  ACKED),
        ] + posting("again", 2, 24 * 60, prefix="PATCH RESEND"),
        "the RESEND is the series; it keeps the review of 1/3 and the ack of the cover given to the first posting",
        trailers={1: [REVIEWED, ACKED], 2: [ACKED], 3: [ACKED]},
        message_ids=["again-1@example.org", "again-2@example.org", "again-3@example.org"],
    )
    carried = Case(
        "trailers-carried-when-patch-id-unchanged",
        posting("old", 1, 0) + [
            reply("old-r1@example.com", "old-1@example.org", f"{v1} 1/3] {TITLES[1]}", BOB, 20, REVIEWED,
                  "old-0@example.org"),
            reply("old-r2@example.com", "old-2@example.org", f"{v1} 2/3] {TITLES[2]}", BOB, 21, REVIEWED,
                  "old-0@example.org"),
        ] + posting("new", 2, 3 * 24 * 60, variants={2: " + 1"}, lines={1: 14}, wording=" (reworded)"),
        "v2 1/3 moved and was reworded but its diff is the same: Bob's review carries over; v2 2/3 changed: it does not",
        trailers={1: [REVIEWED], 2: [], 3: []},
        message_ids=["new-1@example.org", "new-2@example.org", "new-3@example.org"],
    )
    wrapped = Case(
        "trailer-address-wrapped-onto-the-next-line",
        posting("wrap", 1, 0) + [
            reply("wrap-r1@example.com", "wrap-1@example.org", f"{v1} 1/3] {TITLES[1]}", BOB, 20,
                  "Reviewed-by: Bob Reviewer\n<bob@example.com>", "wrap-0@example.org"),
        ],
        "the wrapped Reviewed-by is joined and kept",
        trailers={1: [REVIEWED], 2: [], 3: []},
        message_ids=["wrap-1@example.org", "wrap-2@example.org", "wrap-3@example.org"],
    )
    related = Case(
        "reviewer-writing-from-a-related-address",
        posting("rel", 1, 0) + [
            reply("rel-r1@example.com", "rel-1@example.org", f"{v1} 1/3] {TITLES[1]}",
                  "Robert R. <bob+lkml@example.com>", 20, REVIEWED, "rel-0@example.org"),
            reply("rel-r2@example.com", "rel-2@example.org", f"{v1} 2/3] {TITLES[2]}",
                  "B. Reviewer <bob@lab.example.com>", 21, TESTED, "rel-0@example.org"),
            # someone else's trailer pasted into a reply is not theirs to give
            reply("rel-r3@example.com", "rel-3@example.org", f"{v1} 3/3] {TITLES[3]}",
                  "B. Reviewer <bob@lab.example.com>", 22, ACKED, "rel-0@example.org"),
        ],
        "a +tag and a one-level subdomain are the reviewer's own addresses; Carol's ack sent by Bob is not kept",
        trailers={1: [REVIEWED], 2: [TESTED], 3: []},
        message_ids=["rel-1@example.org", "rel-2@example.org", "rel-3@example.org"],
    )
    reroll = Case(
        "partial-reroll-of-2-of-3",
        posting("pr", 1, 0) + [
            reply("pr-r1@example.com", "pr-1@example.org", f"{v1} 1/3] {TITLES[1]}", BOB, 20, REVIEWED,
                  "pr-0@example.org"),
            reply("pr-r3@example.com", "pr-3@example.org", f"{v1} 3/3] {TITLES[3]}", BOB, 21, REVIEWED,
                  "pr-0@example.org"),
            message("pr-v2-2@example.org", f"{v2} 2/3] {TITLES[2]}", ADA, 60, patch_body(2, " + 2"),
                    reply_to="pr-2@example.org", references=("pr-0@example.org",)),
        ],
        "v2 resends only 2/3 in reply to v1 2/3: parts 1 and 3 come from v1 with their reviews",
        trailers={1: [REVIEWED], 2: [], 3: [REVIEWED]},
        message_ids=["pr-1@example.org", "pr-v2-2@example.org", "pr-3@example.org"],
    )
    cover_ack = Case(
        "ack-on-the-cover-letter",
        posting("ca", 2, 0) + [
            reply("ca-r0@example.net", "ca-0@example.org", f"{v2} 0/3] ringbuf: fix ring_pop", CAROL, 20,
                  "For the series:\n\n" + ACKED),
        ],
        "an Acked-by given to the cover letter goes on every patch",
        trailers={1: [ACKED], 2: [ACKED], 3: [ACKED]},
        message_ids=["ca-1@example.org", "ca-2@example.org", "ca-3@example.org"],
    )
    bare = Case(
        "bare-git-diff",
        [diff(1).encode()],
        "refused before anything is applied: a diff without author or subject is not a patch mail",
        error="has no author (From:) and no subject",
    )
    return [duplicate, resend, carried, wrapped, related, reroll, cover_ack, bare]
