"""The queue of series the CI bot's tests (and bench/bot.py) put on the stand-in patchwork.

Real `git format-patch` mails of the ptr_ring series (tests/support/ring_series.py) on the 6.1
tree, subject-prefixed for net-next: clean, buggy, one that does not apply (a context line of
patch 2 changed in the mail), one posted incompletely (2 of 3 patches), and two versions of one
series (v1 buggy, v2 fixed).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.git_series import format_patch, hunk_in_mail
from tests.support.ring_series import (TAP_FIX_PATCH, TAP_HELPER, TAP_HELPER_NO_LOCK, TUN_HELPER, WAKE_PATCH,
                                       commit_series, tap_patch, tun_patch)

PROJECT = "netdev"
LIST_ID = "netdev.vger.kernel.org"
TAP = "drivers/net/tap.c"
UNLOCKED_CONSUME = "\treturn __ptr_ring_consume(&q->ring);"   # the buggy series' finding is on this line
CHANGED_CONTEXT = "\t\tskb = ptr_ring_consume(&q->rings);"     # the line that keeps "broken" from applying


def mails(repo: Path, base: str, patches, out: Path, prefix: str = "PATCH net-next",
          title: str = "tun, tap: take the ptr_ring consumer lock in one helper") -> list[bytes]:
    """The cover letter (titled `title`) and patches, as bytes, in order."""
    files = format_patch(repo, base, commit_series(repo, base, patches), out, f"--subject-prefix={prefix}")
    # format-patch's Message-Ids are <commit>.<seconds>.git.<author>: two series sharing a commit, made
    # within a second, would share one, and patchwork drops a mail whose Message-Id it already has.
    texts = [Path(f).read_bytes().replace(b".git.ada@example.org>", f".{out.name}.git.ada@example.org>".encode())
             for f in files]
    texts[0] = texts[0].replace(b"*** SUBJECT HERE ***", title.encode()).replace(
        b"*** BLURB HERE ***", b"Two ring consumers get a helper that holds the consumer lock.")
    return texts


def build_queue(repo: Path, base: str, out: Path) -> dict[str, tuple[list[bytes], int | None]]:
    """name -> (mails, total override or None), in the order they are posted."""
    clean = mails(repo, base, [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER)], out / "clean")
    buggy = mails(repo, base, [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER_NO_LOCK)], out / "buggy")
    broken = mails(repo, base, [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER)], out / "broken")
    old = b"-\t\tskb = ptr_ring_consume(&q->ring);"
    assert old in broken[2]
    broken[2] = broken[2].replace(old, b"-" + CHANGED_CONTEXT.encode())
    partial = mails(repo, base, [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER_NO_LOCK), WAKE_PATCH],
                    out / "partial", title="tun: wake the queue from the consumer")[:3]
    v1 = mails(repo, base, [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER_NO_LOCK)], out / "v1")
    v2 = mails(repo, base, [tun_patch(TUN_HELPER), tap_patch(TAP_HELPER_NO_LOCK), TAP_FIX_PATCH], out / "v2",
               prefix="PATCH net-next v2")
    return {"clean": (clean, None), "buggy": (buggy, None), "broken": (broken, None),
            "partial": (partial, 3), "v1": (v1, None), "v2": (v2, None)}


def positions(queue: dict[str, tuple[list[bytes], int | None]]) -> tuple[int, str]:
    """(line of the buggy series' finding in tap.c, header of the hunk that does not apply), as the
    tree at hand puts them: another point release may move tap.c's lines."""
    _, line = hunk_in_mail(queue["buggy"][0][2], TAP, UNLOCKED_CONSUME)
    hunk, _ = hunk_in_mail(queue["broken"][0][2], TAP, CHANGED_CONTEXT)
    return line, hunk
