"""Checker findings for people (text, mail), for editors and CI logs (terse), for tools (json, sarif).

A `Report` is what one `check` or `lint` run found: the findings with the source lines they quote
(patchbench.report.quote), for a series the header (series, tree, base and why) and each patch
as it was posted (`[PATCH net-next v2 2/3] subject`), the patch that did not apply, and what was
checked. `render(report, fmt)` prints it; `series_report` and `lint_report` build it from the
stages' results. Text is at most 100 columns, mail (a reply body to paste) at most 72.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from patchbench.checks.engine import registry
from patchbench.checks.engine.finding import Finding
from patchbench.report import sarif
from patchbench.report.quote import Context, context
from patchbench.tree.git import Git, open_repository

if TYPE_CHECKING:   # annotations only: `lint` need not import the mail and series stages
    from patchbench.checks.run.series import SeriesCheck
    from patchbench.series import Patch, Series
    from patchbench.tree import ApplyResult

FORMATS = ("text", "mail", "terse", "json", "sarif")
TEXT_WIDTH, MAIL_WIDTH = 100, 72


@dataclass
class PatchLine:
    """One patch of a series as the report names it."""
    index: int
    commit: str
    name: str                                        # "[PATCH net-next v2 2/3] subject", as posted
    files: list[str] = field(default_factory=list)   # the C files analysed


@dataclass
class SeriesHeader:
    name: str              # the cover letter's subject line, else the first patch's
    total: int
    tree: str | None       # as the subject prefix names it
    base: str
    base_reason: str       # why this base (the tree stage says)
    ref: str | None = None


@dataclass
class FailedPatch:
    index: int
    name: str
    file: str | None
    hunk: str | None       # "@@ -2180,7 +2180,9 @@"
    reason: str

    @property
    def line(self) -> int | None:
        """Where in `file` the hunk that failed starts (its preimage line)."""
        match = re.match(r"@@ -(\d+)", self.hunk or "")
        return int(match[1]) if match else None


@dataclass
class Checked:
    """What the run looked at, for the closing summary."""
    patches: int
    files: list[str]
    rules: list[str]
    seconds: float | None = None    # shown to people only: machine formats stay the same run to run


@dataclass
class Report:
    findings: list[Finding]
    contexts: list[Context] = field(default_factory=list)   # one per finding, or none at all
    header: SeriesHeader | None = None                        # None: lint (no series)
    patches: list[PatchLine] = field(default_factory=list)
    failed: FailedPatch | None = None
    checked: Checked | None = None
    checks: list = field(default_factory=list)   # patchchecks.CheckRun of each check (series only)

    def shown(self) -> list[tuple[Finding, Context]]:
        return list(zip(self.findings, self.contexts or [Context()] * len(self.findings)))


def patch_name(series: Series, patch: Patch) -> str:
    """How the patch was posted: `[PATCH net-next v2 2/3] subject` (its own version)."""
    version = f" v{patch.version}" if patch.version > 1 else ""
    counter = f" {patch.index}/{series.total}" if series.total > 1 else ""
    return f"[{series.subject_prefix}{version}{counter}] {patch.subject}"


def series_name(series: Series) -> str:
    if series.cover is None:
        return patch_name(series, series.patches[0]) if series.patches else series.title
    version = f" v{series.version}" if series.version > 1 else ""
    return f"[{series.subject_prefix}{version} 0/{series.total}] {series.cover.subject}"


def series_report(series: Series, applied: ApplyResult, checked: SeriesCheck,
                  seconds: float | None = None, checks: list | None = None) -> Report:
    """The report of `patchbench check`: each applied patch with its new findings, or where it stopped."""
    names = {p.index: patch_name(series, p) for p in series.patches}
    patches = [PatchLine(p.index, p.commit, names.get(p.index, f"patch {p.index}"), p.files)
               for p in checked.patches]
    failed = None
    if applied.failed is not None:
        f = applied.failed
        failed = FailedPatch(f.index, names.get(f.index, f"patch {f.index}"), f.file, f.hunk, f.reason)
    commits = {p.index: p.commit for p in checked.patches}
    contexts = []
    if checked.findings:
        with Git(open_repository(applied.repo)).blobs() as blobs:
            contexts = [context(f, blobs.read(f"{commits[f.patch]}:{f.file}") if f.file else None)
                    for f in checked.findings]
    header = SeriesHeader(series_name(series), series.total, series.tree, applied.base,
                          applied.base_reason, applied.ref)
    files = sorted({path for p in checked.patches for path in p.files})
    return Report(checked.findings, contexts, header, patches, failed,
                  Checked(len(checked.patches), files, _rule_ids(), seconds), checks or [])


def lint_report(findings: list[Finding], files: list[str], seconds: float | None = None,
                rule_ids: list[str] | None = None) -> Report:
    """The report of a lint; `rule_ids`: the rules run (default: the default rules)."""
    sources: dict[str, bytes | None] = {}
    for path in dict.fromkeys(f.file for f in findings):
        try:
            sources[path] = Path(path).read_bytes()
        except OSError:
            sources[path] = None   # gone since it was analysed: shown without its lines
    contexts = [context(f, sources[f.file]) for f in findings]
    return Report(findings, contexts, checked=Checked(0, files, rule_ids or _rule_ids(lint=True), seconds))


def _rule_ids(lint: bool = False) -> list[str]:
    return registry.default_rule_ids(lint)


def render(report: Report, fmt: str, explain: bool = False) -> str:
    """The report in `fmt`; `explain`: text shows what decided each finding (its `because`;
    json and sarif always carry it)."""
    if fmt == "terse":
        return _terse(report)
    if fmt == "json":
        return json.dumps(_json(report), indent=2)
    if fmt == "sarif":
        return json.dumps(sarif.to_sarif(report.findings, report.contexts, _sarif_failure(report)), indent=2)
    if fmt == "mail":
        return _mail(report)
    return _text(report, explain)


# --- terse: one `file:line: severity: rule: message` line each (checkpatch-like) ----------------

def terse(finding: Finding, total: int | None = None) -> str:
    patch = f"patch {finding.patch}/{total}: " if finding.patch is not None and total else ""
    return f"{location_of(finding) or '-'}: {finding.severity}: {finding.rule}: {patch}{finding.message}"


def _terse(report: Report) -> str:
    total = report.header.total if report.header else None
    lines = [terse(f, total) for f in report.findings]
    failed = report.failed
    if failed:
        where = f"{failed.file}:{failed.line}" if failed.file and failed.line else failed.file or "-"
        hunk = f" at hunk {failed.hunk}" if failed.hunk else ""
        lines.append(f"{where}: error: apply: patch {failed.index}/{total} does not apply{hunk}: "
                     f"{failed.name}: {_one_line(failed.reason)}")
    return "\n".join(lines)


# --- json and sarif -----------------------------------------------------------------------------

def finding_json(finding: Finding, shown: Context, with_patch: bool) -> dict:
    data = asdict(finding)
    if not with_patch:
        data.pop("patch")
    data["source"] = shown.source
    data["related"] = asdict(shown.related) if shown.related else None
    return data


def _json(report: Report) -> dict:
    series = report.header is not None
    data: dict = {"findings": [finding_json(f, c, series) for f, c in report.shown()]}
    checked = report.checked
    if checked:
        data["checked"] = {"patches": checked.patches, "files": checked.files, "rules": checked.rules}
    if not series:
        return data
    h = report.header
    failed = report.failed
    return {
        "base": h.base, **data,
        "series": {"name": h.name, "total": h.total, "tree": h.tree, "base": h.base,
                   "base_reason": h.base_reason, "ref": h.ref},
        "patches": [{"index": p.index, "commit": p.commit, "name": p.name, "files": p.files,
                     "new_findings": sum(f.patch == p.index for f in report.findings)}
                    for p in report.patches],
        "failed": {"index": failed.index, "name": failed.name, "file": failed.file, "hunk": failed.hunk,
                   "line": failed.line, "reason": failed.reason} if failed else None,
        "checks": [run.to_json() for run in report.checks],
    }


def _sarif_failure(report: Report) -> sarif.Failure | None:
    failed = report.failed
    if failed is None:
        return None
    return sarif.Failure(failed.index, f"{failed.name} does not apply"
                         + (f" (hunk {failed.hunk})" if failed.hunk else "") + f": {_one_line(failed.reason)}",
                         failed.file, failed.line)


# --- text (100 columns) and mail (72 columns, quoted code) --------------------------------------

def _one_line(text: str) -> str:
    return " ".join(text.split())


def wrap(text: str, width: int, indent: str = "", later: str | None = None, *, split_words: bool = True) -> list[str]:
    """`text` in lines of at most `width` columns; `split_words=False` keeps a long word (a path) whole."""
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent if later is None else later,
                         break_on_hyphens=False, break_long_words=split_words) or [indent.rstrip()]


def _code(text: str, room: int) -> str:
    """A source line shown in `room` columns: tabs expanded, its indentation dropped if it must."""
    line = text.expandtabs(8).rstrip()
    if len(line) > room:
        line = line.strip()
    return line if len(line) <= room else line[:room - 4] + " ..."


def _plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n} {word if n == 1 else words or word + 's'}"


def _rest(failed: int, total: int) -> str:
    """The patches after the one that failed."""
    return f"patch {total} was" if failed + 1 == total else f"patches {failed + 1} to {total} were"


def location_of(finding: Finding) -> str:
    """`file:line`, `file` (a finding about a whole file) or "" (one about a commit message, as the
    netdev checks give)."""
    return f"{finding.file}:{finding.line}" if finding.file and finding.line else finding.file


def _finding_text(finding: Finding, shown: Context, explain: bool = False) -> list[str]:
    width = TEXT_WIDTH
    function = f" in {finding.function}()" if finding.function else ""
    place = f"{location_of(finding)}: " if finding.file else ""
    lines = wrap(f"{place}{finding.severity}:{function} [{finding.rule}]", width, "  ", "      ")
    lines += wrap(_one_line(finding.message), width, "      ")
    if shown.source is not None:
        lines.append(f"      {finding.line:>6} | " + _code(shown.source, width - 15))
    if shown.related:
        lines.append(f"      {shown.related.what}:")
        lines.append(f"      {shown.related.line:>6} | " + _code(shown.related.text, width - 15))
    if explain:
        for reason in finding.because:
            lines += wrap(f"because: {reason}", width, "      ", "        ")
    return lines


def _summary(report: Report, width: int) -> list[str]:
    checked = report.checked
    if checked is None:
        return [_plural(len(report.findings), "finding")]
    patches = _plural(checked.patches, "patch", "patches")
    if report.header and checked.patches < report.header.total:
        patches = f"{checked.patches} of {_plural(report.header.total, 'patch', 'patches')}"
    parts = ([patches] if report.header else []) + [
        _plural(len(checked.files), "C file"), _plural(len(checked.rules), "rule")]
    took = f" in {checked.seconds:.1f} s" if checked.seconds is not None else ""
    new = "new finding" if report.header else "finding"
    lines = wrap(f"Checked {', '.join(parts)}{took}: {_plural(len(report.findings), new)}.", width)
    if report.header and checked.files:
        lines += wrap("Files: " + ", ".join(checked.files), width, "", "  ")
    lines += wrap("Rules: " + ", ".join(checked.rules), width, "", "  ")
    ran = [run.id for run in report.checks if run.status == "ran" and run.id != "rules"]
    if ran:
        lines += wrap("Patch checks: " + ", ".join(ran), width, "", "  ")
    for run in report.checks:
        if run.status == "skipped" and run.reason != "not selected":
            lines += wrap(f"{run.id} skipped: {run.reason}", width, "", "  ")
    return lines


def _text(report: Report, explain: bool = False) -> str:
    width = TEXT_WIDTH
    if report.header is None:
        lines = []
        for finding, shown in report.shown():
            lines += _finding_text(finding, shown, explain)
        return "\n".join(lines + _summary(report, width))
    h = report.header
    lines = wrap(f"Series: {h.name}", width, "", "        ")
    lines += wrap(f"Tree:   {h.tree or '(the subject names none)'}", width)
    lines += wrap(f"Base:   {h.base[:12]} ({h.base_reason})", width, "", "        ")
    for patch in report.patches:
        own = [(f, c) for f, c in report.shown() if f.patch == patch.index]
        lines += [""] + wrap(patch.name, width, "", "    ")
        lines.append(f"  {_plural(len(own), 'new finding') if own else 'no new findings'}")
        for finding, shown in own:
            lines += _finding_text(finding, shown, explain)
    if report.failed:
        failed = report.failed
        lines += [""] + wrap(failed.name, width, "", "    ")
        where = ", ".join(part for part in (failed.file, failed.hunk) if part)
        lines += wrap(f"does not apply{' at ' + where if where else ''}: {_one_line(failed.reason)}",
                       width, "  ", "    ")
        if failed.index < h.total:
            lines.append(f"  {_rest(failed.index, h.total)} not applied or checked")
    if h.ref:
        lines += [""] + wrap(f"Applied commits: {h.ref}", width, "", "  ")
    return "\n".join(lines + [""] + _summary(report, width))


def _mail(report: Report) -> str:
    """A plain-text reply body: prose at 72 columns, source lines quoted with `> `."""
    width = MAIL_WIDTH
    h = report.header
    lines: list[str] = []
    if h is not None:
        lines += wrap(f"patchbench applied {h.name} to {h.tree or 'the tree'} at {h.base[:12]} "
                       f"({h.base_reason}) and checked each patch{' that applied' if report.failed else ''}.", width)
    for finding, shown in report.shown():
        lines.append("")
        if h is not None:
            name = next((p.name for p in report.patches if p.index == finding.patch), f"patch {finding.patch}")
            lines += wrap(f"In {name}:", width) + [""]
        function = f", in {finding.function}()" if finding.function else ""
        lines += wrap(f"{location_of(finding) or 'The commit message'}{function}:", width)
        if shown.source is not None:
            lines += ["", "> " + _code(shown.source, width - 2)]
        lines += [""] + wrap(f"{_one_line(finding.message)} [{finding.rule}, {finding.severity}]", width)
        if shown.related:
            lines += ["", f"{shown.related.what.capitalize()} at line {shown.related.line}:", "",
                      "> " + _code(shown.related.text, width - 2)]
    clean = [p.name for p in report.patches if not any(f.patch == p.index for f in report.findings)]
    if clean:
        lines += [""] + wrap("No new findings in " + "; ".join(clean) + ".", width)
    if report.failed:
        failed = report.failed
        where = ", ".join(part for part in (failed.file, failed.hunk) if part)
        lines += [""] + wrap(f"{failed.name} does not apply{' (' + where + ')' if where else ''}: "
                              f"{_one_line(failed.reason)}", width)
        if h is not None and failed.index < h.total:
            lines += wrap(f"{_rest(failed.index, h.total).capitalize()} not checked.", width)
    lines += ["", "-- "] + _summary(report, width)
    return "\n".join(lines).lstrip("\n")
