"""Checker findings for people (text), for editors and CI logs (terse), for tools (json, sarif).

`render(findings, fmt, patches=...)`: with `patches` (a series check) text groups the findings
by patch and json has the DESIGN.md `check` shape; without, the `lint` shape.
`render_check(applied, checked, fmt)` is that report straight from the tree and checks stages.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from patchbench.checks.finding import Finding
from patchbench.checks.patches import SeriesCheck
from patchbench.report import sarif
from patchbench.tree import ApplyResult

FORMATS = ("text", "terse", "json", "sarif")


@dataclass
class PatchLine:
    """What the report says about one patch of a series."""
    index: int
    commit: str
    subject: str = ""


def terse(finding: Finding) -> str:
    return f"{finding.file}:{finding.line}: {finding.severity}: {finding.rule}: {finding.message}"


def finding_json(finding: Finding, with_patch: bool) -> dict:
    data = asdict(finding)
    if not with_patch:
        data.pop("patch")
    return data


def _line(finding: Finding) -> str:
    """`file:line: in function(): severity: message [rule]`; a finding about a commit message (the
    netdev checks') has no file, one about a whole file no line, and neither has a function."""
    where = f"{finding.file}:{finding.line}: " if finding.line else f"{finding.file}: " if finding.file else ""
    function = f"in {finding.function}(): " if finding.function else ""
    return f"{where}{function}{finding.severity}: {finding.message} [{finding.rule}]"


def _failure_line(failed: dict) -> str:
    where = ", ".join(str(failed[k]) for k in ("file", "hunk") if failed.get(k))
    return f"patch {failed['index']} does not apply{': ' + where if where else ''}: {failed['reason']}"


def _text(findings: list[Finding], patches: list[PatchLine] | None, failed: dict | None) -> str:
    lines = []
    if patches is None:
        for finding in findings:
            lines.append(_line(finding))
        lines.append(f"{len(findings)} finding{'s' * (len(findings) != 1)}")
        return "\n".join(lines)
    for patch in patches:
        own = [f for f in findings if f.patch == patch.index]
        title = f"patch {patch.index} {patch.commit[:12]}" + (f" {patch.subject}" if patch.subject else "")
        lines.append(f"{title}: {len(own) or 'no'} new finding{'s' * (len(own) != 1)}")
        for finding in own:
            lines.append("    " + _line(finding))
    if failed:
        lines.append(_failure_line(failed))
    return "\n".join(lines)


def render(findings: list[Finding], fmt: str, *, patches: list[PatchLine] | None = None,
           base: str | None = None, failed: dict | None = None) -> str:
    """`failed` is {"index", "file", "hunk", "reason"} of a patch that did not apply."""
    if fmt == "terse":
        lines = [terse(f) for f in findings]
        if failed:
            lines.append(f"{failed.get('file') or '-'}:0: error: apply: {_failure_line(failed)}")
        return "\n".join(lines)
    if fmt == "json":
        data: dict = {"findings": [finding_json(f, patches is not None) for f in findings]}
        if patches is not None:
            data = {"base": base, **data,
                    "patches": [{"index": p.index, "commit": p.commit,
                                 "new_findings": sum(f.patch == p.index for f in findings)}
                                for p in patches],
                    "failed": failed}
        return json.dumps(data, indent=2)
    if fmt == "sarif":
        return json.dumps(sarif.to_sarif(findings), indent=2)
    return _text(findings, patches, failed)


def render_check(applied: ApplyResult, checked: SeriesCheck, fmt: str) -> str:
    """The report of `patchbench check`: each applied patch with its new findings, or where it stopped."""
    subjects = {p.index: p.subject for p in applied.applied}
    patches = [PatchLine(p.index, p.commit, subjects.get(p.index, "")) for p in checked.patches]
    return render(checked.findings, fmt, patches=patches, base=applied.base, failed=applied.to_json()["failed"])
