"""placeholder"""
from __future__ import annotations

UNKNOWN_WAY = frozenset({("unknown", "way")})


def entries(path: str, name: str) -> list[frozenset]:
    return [UNKNOWN_WAY]
