"""Fetch a whole thread from a public-inbox archive (lore.kernel.org) by Message-Id or thread URL.

`<msgid@host>` or `msgid@host` asks the archive named by $PATCHBENCH_LORE_URL (default
https://lore.kernel.org/all) for `<msgid>/t.mbox.gz`; a thread URL such as
https://lore.kernel.org/netdev/<msgid>/T/ is turned into that same mbox address.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import BinaryIO, Callable
from urllib.error import HTTPError, URLError
from urllib.parse import quote, unquote, urlsplit, urlunsplit
from urllib.request import Request, urlopen

from patchbench import __version__
from patchbench.errors import BadInput

LORE_URL_ENV = "PATCHBENCH_LORE_URL"
_MESSAGE_ID = re.compile(r"^<?([^\s<>/@]+@[^\s<>/@]+)>?$")


def thread_url(source: str) -> str | None:
    """The mbox address of the thread `source` names, or None when `source` is a local path."""
    if source.startswith(("http://", "https://")):
        parts = urlsplit(source)
        if parts.path.endswith((".mbox.gz", ".mbox")):
            return source
        segments = [unquote(s) for s in parts.path.split("/") if s]
        at = next((i for i, segment in enumerate(segments) if "@" in segment), None)
        if at is None:
            raise BadInput(f"{source}: no Message-Id in this archive address")
        path = "/".join(quote(s, safe="@+=") for s in segments[:at + 1]) + "/t.mbox.gz"
        return urlunsplit((parts.scheme, parts.netloc, "/" + path, "", ""))
    match = _MESSAGE_ID.match(source)
    if match and not Path(source).exists():
        base = os.environ.get(LORE_URL_ENV, "https://lore.kernel.org/all").rstrip("/")
        return f"{base}/{quote(match.group(1), safe='@+=')}/t.mbox.gz"
    return None


def download(url: str, into: BinaryIO, take_bytes: Callable[[int], None]) -> None:
    """Stream the body at `url` into a file, passing each chunk's size to `take_bytes` (which raises
    BadInput past a limit); failures become BadInput naming the address."""
    request = Request(url, headers={"User-Agent": f"patchbench/{__version__}"})
    try:
        with urlopen(request, timeout=60) as response:
            while chunk := response.read(1 << 20):
                take_bytes(len(chunk))
                into.write(chunk)
    except HTTPError as error:
        raise BadInput(f"{url}: the archive answered {error.code} {error.reason}") from None
    except (URLError, OSError) as error:
        raise BadInput(f"{url}: cannot fetch: {getattr(error, 'reason', error)}") from None
