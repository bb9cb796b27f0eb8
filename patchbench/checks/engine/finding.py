"""What the checker reports: a rule's message template and its arguments, and where.

A finding is data, as in pyflakes: the rule, which of its messages (`kind`, a name in the rule's
MESSAGES) and that template's arguments, its location, the related location (where the lock was
taken, the read-side section ended, the queue is stopped) and the other lines of the same defect.
The message is rendered from those fields and never read back. Its identity, which says whether a
patch made it new and which keys SARIF fingerprints, is the rule, file, function, kind and
arguments (numbers blanked: lines of other files shift too): rewording a template changes no
identity. The netdev per-patch checks make findings from text alone (no kind): their identity is
the message with numbers blanked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Place:
    """A line related to a finding, and what happens there."""
    what: str      # "lock taken", "read-side section ended", "queue stopped"
    line: int


@dataclass
class Finding:
    rule: str                      # rule id, e.g. "rcu-deref-unprotected"
    severity: str                  # "error" | "warning" | "note"
    file: str                      # path relative to the tree root
    line: int
    function: str
    message: str                   # rendered from the rule's template `kind` and `args`
    patch: int | None = None       # index of the patch that introduced it (series checks only)
    kind: str = ""                 # which of the rule's MESSAGES ("" for a text-only finding)
    args: tuple[tuple[str, str], ...] = ()   # the template's arguments, by name, in name order
    related: Place | None = None   # the place the message relates this one to
    also: tuple[int, ...] = ()     # other lines of the same defect (a value used after its section)
    # what decided it, for a reviewer to confirm (`--explain`): the ways into the function and
    # what each holds, the facts-table entries applied; not part of the identity
    because: tuple[str, ...] = ()

    def identity(self) -> tuple:
        """Rule, file, function, kind and arguments, numbers blanked: stable when lines shift and
        when a template is reworded."""
        if not self.kind:
            return (self.rule, self.file, self.function, _blank(self.message))
        return (self.rule, self.file, self.function, self.kind,
                tuple((name, _blank(value)) for name, value in self.args))

    def to_dict(self) -> dict:
        """Plain JSON types (as dataclasses.asdict gives them), read back by from_dict()."""
        return {"rule": self.rule, "severity": self.severity, "file": self.file, "line": self.line,
                "function": self.function, "message": self.message, "patch": self.patch, "kind": self.kind,
                "args": [list(pair) for pair in self.args],
                "related": {"what": self.related.what, "line": self.related.line} if self.related else None,
                "also": list(self.also), "because": list(self.because)}

    @classmethod
    def from_dict(cls, data: dict) -> "Finding":
        related = data.get("related")
        return cls(rule=data["rule"], severity=data["severity"], file=data["file"], line=data["line"],
                   function=data["function"], message=data["message"], patch=data.get("patch"),
                   kind=data.get("kind", ""), args=tuple(tuple(pair) for pair in data.get("args", ())),
                   related=Place(**related) if related else None, also=tuple(data.get("also", ())),
                   because=tuple(data.get("because", ())))

    @property
    def repeats(self) -> int:
        """How many other places of the same defect the finding names."""
        return len(self.also)


def _blank(text: str) -> str:
    return re.sub(r"\d+", "N", text)


def render(template: str, args: tuple[tuple[str, str], ...], also: tuple[int, ...] = ()) -> str:
    """The message: the template filled in; the other lines of the defect named where the template
    says `{also}`, else at its end."""
    named = f" (also at line{'s' if len(also) > 1 else ''} {', '.join(map(str, also))})" if also else ""
    if "{also}" in template:
        return template.format(**dict(args), also=named)
    return template.format(**dict(args)) + named
