"""fixes-tag: each Fixes: names, the way the kernel asks, a commit that is in the tree below the base.

`Fixes: <12+ hex digits> ("<subject>")`: the commit must exist in the repository, its subject
must be the one quoted, and it must be an ancestor of the base the series applies to (a fix for a
commit the base does not have is for another tree; one newer than the base cannot be fixed here).
Fixes: given in replies, which the tree stage puts on the commit, are checked too.
For a series to a fixes tree (`net`, `bpf`, ... in netdev.toml), a patch without Fixes: is a
warning, unless it touches only Documentation/ and MAINTAINERS.
"""

from __future__ import annotations

import re

from patchbench.checks.engine.finding import Finding
from patchbench.patchchecks.context import PatchContext, message_finding, netdev_facts

ID = "fixes-tag"
MESSAGE = "Fixes: tags name, with 12+ hex digits and the right subject, an ancestor of the base"
NEEDS = ()

_FIXES = re.compile(r"^\s*Fixes:\s*(?P<sha>\S+)(?:\s+(?P<rest>.*?))?\s*$", re.IGNORECASE)
_QUOTED = re.compile(r'^\("(?P<subject>.*)"\)$')
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_DOCS_ONLY = re.compile(r"^(Documentation/|MAINTAINERS$)")


def fixes_lines(body: str) -> list[str]:
    return [line for line in body.splitlines() if re.match(r"^\s*Fixes:", line, re.IGNORECASE)]


def _check_one(context: PatchContext, line: str) -> list[tuple[str, str]]:
    """(severity, message) of what is wrong with one Fixes: line."""
    match = _FIXES.match(line)
    sha, rest = (match["sha"], match["rest"] or "") if match else ("", "")
    if not _HEX.match(sha):
        return [("error", f"'{line.strip()}' does not start with a commit id")]
    problems = []
    if len(sha) < 12:
        problems.append(("warning", f"Fixes: {sha} has {len(sha)} hex digits; use at least 12"))
    quoted = _QUOTED.match(rest)
    if not quoted:
        problems.append(("warning", f"Fixes: {sha} does not quote the subject as (\"subject\")"))
    tree = context.tree
    full = tree.git("rev-parse", "--verify", "--quiet", f"{sha}^{{commit}}", check=False).strip()
    if not full:
        return problems + [("error", f"Fixes: {sha} names no commit of this repository")]
    subject = tree.git("log", "-1", "--format=%s", full).strip()
    if quoted and " ".join(quoted["subject"].split()) != " ".join(subject.split()):
        problems.append(("error", f"Fixes: {sha} quotes (\"{quoted['subject']}\") but that commit is (\"{subject}\")"))
    base = context.applied.base
    if not tree.is_ancestor(full, base):
        if tree.is_ancestor(base, full):
            problems.append(("error", f"Fixes: {sha} (\"{subject}\") is newer than the base {base[:12]}"))
        else:
            problems.append(("error", f"Fixes: {sha} (\"{subject}\") is not in the history of the base {base[:12]}"))
    return problems


def run(context: PatchContext) -> list[Finding]:
    found = []
    target = netdev_facts()["trees"].get(context.series.tree or "", {})
    for patch in context.applied.applied:
        mail = context.mail(patch)
        if mail is None:
            continue
        lines = fixes_lines(mail.body)
        written = {" ".join(line.split()) for line in lines}
        # a Fixes: given in a reply is collected onto the commit too
        lines += [t for t in fixes_lines("\n".join(mail.trailers)) if " ".join(t.split()) not in written]
        for line in lines:
            for severity, message in _check_one(context, line):
                found.append(message_finding(ID, severity, message, patch.index))
        if not lines and target.get("fixes") and not all(_DOCS_ONLY.match(f.path) for f in mail.files):
            found.append(message_finding(ID, "warning", f"a patch for {context.series.tree} without a Fixes: tag",
                                         patch.index))
    return found
