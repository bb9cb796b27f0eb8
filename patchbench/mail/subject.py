"""Read the `[PATCH net-next v7 3/9]`-style prefix of a subject: version, counters, target tree."""

from __future__ import annotations

import re
from dataclasses import dataclass

_REPLY_MARK = re.compile(r"^\s*(re|aw|fwd?|sv|antw|vs|ref)\s*(\[\d+\])?\s*:\s*", re.IGNORECASE)
_KEYWORD = re.compile(r"^(patch|rfc|resend|pull|git|git pull)(?:[-_]?v(\d+))?$", re.IGNORECASE)
_VERSION = re.compile(r"^v(\d+)$", re.IGNORECASE)
_COUNTER = re.compile(r"^(\d+)/(\d+)$")
_TOKEN_SPLIT = re.compile(r"[\s,]+")
_MOST_PREFIXES = 32   # real subjects have a handful; a mangled one must not cost quadratic time


@dataclass(slots=True)
class Subject:
    title: str                       # the subject with every prefix removed
    prefix: str = ""                 # e.g. "PATCH net-next" (no version, no counters)
    version: int = 1
    version_given: bool = False      # the subject says which version (v1 when it does not)
    index: int | None = None         # n of n/N; None when the subject has no counter
    total: int | None = None
    tree: str | None = None          # first non-keyword word of the patch prefix: net, net-next, ...
    is_reply: bool = False
    is_patch: bool = False           # a PATCH/RFC/PULL keyword or a counter is present


def parse_subject(subject: str) -> Subject:
    rest = " ".join(subject.split())
    result = Subject(title="")
    for _ in range(_MOST_PREFIXES):
        reply = _REPLY_MARK.match(rest)
        if reply:
            result.is_reply = True
            rest = rest[reply.end():]
            continue
        bracket = _leading_bracket(rest)
        if bracket is None:
            bare = re.match(r"^(PATCH(?:v\d+)?|RFC)(\s+\d+/\d+)?\s*:?\s+", rest)
            if bare and not result.is_patch:  # "PATCHv3 2/5: ..." without brackets
                _read_prefix_words(bare.group(0).rstrip(": ").split(), result)
                rest = rest[bare.end():]
                continue
            break
        inner, rest = bracket
        _read_prefix_words(_TOKEN_SPLIT.split(inner.strip()), result)
        rest = rest.lstrip(" :")
    result.title = rest.strip()
    return result


def _leading_bracket(text: str) -> tuple[str, str] | None:
    """`[a [b] c] rest` -> ("a [b] c", "rest"): brackets may nest."""
    text = text.lstrip()
    if not text.startswith("["):
        return None
    depth = 0
    for position, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth == 0:
            return text[1:position], text[position + 1:]
    return None


def _read_prefix_words(words: list[str], result: Subject) -> None:
    words = [word.strip("[]") for word in words if word.strip("[]")]
    is_patch_bracket = any(_KEYWORD.match(w) or _COUNTER.match(w) or _VERSION.match(w) for w in words)
    is_patch_bracket = is_patch_bracket or _of_counter(words) is not None
    if not is_patch_bracket:
        return  # a list tag such as [Qemu-devel]
    result.is_patch = True
    kept = []
    counter = _of_counter(words)
    if counter:
        result.index, result.total = counter
    for word in words:
        keyword, version, count = _KEYWORD.match(word), _VERSION.match(word), _COUNTER.match(word)
        if keyword and keyword.group(2):
            result.version, result.version_given = int(keyword.group(2)), True
            word = word[: keyword.start(2) - 1].rstrip("-_") if word[keyword.start(2) - 1] in "vV" else word
        if version:
            result.version, result.version_given = int(version.group(1)), True
        elif count:
            result.index, result.total = int(count.group(1)), int(count.group(2))
        elif counter is None or not (word.isdigit() or word.lower() == "of"):
            kept.append(word)
            if not keyword and result.tree is None and not word.isdigit():
                result.tree = word
    result.prefix = " ".join([result.prefix, *kept]).strip()


def _of_counter(words: list[str]) -> tuple[int, int] | None:
    """Mercurial's `[PATCH 1 of 5]`."""
    for i in range(len(words) - 2):
        if words[i].isdigit() and words[i + 1].lower() == "of" and words[i + 2].isdigit():
            return int(words[i]), int(words[i + 2])
    return None
