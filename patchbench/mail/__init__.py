"""Stage 1: read a mail source into decoded `Mail` objects, one at a time."""

from __future__ import annotations

from collections.abc import Iterator

from patchbench.mail.decode import Mail, decode_mail
from patchbench.mail.limits import InputLimits
from patchbench.mail.sources import iter_raw_messages

__all__ = ["InputLimits", "Mail", "decode_mail", "read_mails", "read_mails_at"]


def read_mails(source: str, limits: InputLimits = InputLimits(), name: str | None = None) -> Iterator[Mail]:
    """Decode every message of `source` (a path or "-"), streaming; raises BadInput if unreadable or
    past a limit (naming the source `name`, when given)."""
    for position, raw in enumerate(iter_raw_messages(source, limits, name)):
        yield decode_mail(raw, position)


def read_mails_at(source: str, positions: set[int], limits: InputLimits = InputLimits()) -> dict[int, Mail]:
    """Decode only the messages at `positions` (second pass over a source read before)."""
    found: dict[int, Mail] = {}
    last = max(positions, default=-1)
    for position, raw in enumerate(iter_raw_messages(source, limits)):
        if position in positions:
            found[position] = decode_mail(raw, position)
        if position >= last:
            break
    return found
