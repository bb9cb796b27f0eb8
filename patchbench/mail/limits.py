"""How much mail one command reads at most: an input past a limit is refused in one line, quickly and
in little memory (a 1 MB gzip can inflate to 1 GiB of zeros), instead of being read for minutes.

The defaults are far above any real patch mailbox (a long lore thread is a few MB, a few hundred
messages, header blocks of a few KB, lines under 1,000 characters); each has a flag to raise it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from patchbench.errors import BadInput

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


@dataclass(frozen=True)
class InputLimits:
    max_input_size: int = 128 << 20        # bytes of mail, after decompression, in the whole source
    max_messages: int = 50_000
    max_header_size: int = 1 << 20         # bytes of one message's header block
    max_line_length: int = 1 << 20         # bytes of one line

    @staticmethod
    def refuse(before: str, limit: int, after: str, flag: str) -> BadInput:
        """`<before> <limit> <after> (raise the limit with <flag>)`: the one line an input past a limit gets."""
        shown = f"{limit:,}" if flag == "--max-messages" else human_size(limit)
        return BadInput(" ".join(filter(None, [before, shown, after])) + f" (raise the limit with {flag})")


def parse_size(text: str) -> int:
    """`4096`, `512K`, `300M`, `2G` (binary units) -> bytes; for argparse `type=`."""
    match = _SIZE.match(text)
    if not match or int(match.group(1)) == 0:
        raise ValueError(text)
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def human_size(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size:,} bytes"
