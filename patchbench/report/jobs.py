"""Build and boot job results in the report: text for people, JSON for tools (docs/interface.md, `run --format json`)."""

from __future__ import annotations

from patchbench.dispatch import coverage
from patchbench.dispatch.coverage import FunctionCoverage
from patchbench.dispatch.jobs import JobResult
from patchbench.report.findings import TEXT_WIDTH, wrap


def to_json(results: list[JobResult]) -> list[dict]:
    return [r.to_json() for r in results]


def _title(result: JobResult) -> str:
    what = "kernel" if result.scope == "kernel" else result.kind
    where = f"patch {result.patch}" if result.patch is not None else "head"
    return f"{what} {where} {result.commit[:12]}"


def first_failing_boot(results: list[JobResult]) -> dict | None:
    """The first booted patch whose guest showed a splat or a stall (boots run in patch order)."""
    for r in results:
        if r.kind == "boot" and r.status == "fail" and r.fingerprint:
            return {"patch": r.patch, "commit": r.commit, "fingerprint": r.fingerprint, "reason": r.reason}
    return None


def to_text(results: list[JobResult]) -> str:
    lines = []
    for r in results:
        reason = f": {r.reason}" if r.reason else ""
        lines.append(f"{_title(r)}: {r.status}{reason} ({r.seconds:.1f} s)")
        for d in r.new_warnings:
            lines.append(f"    new {d.kind}: {d.file}:{d.line}: {d.function or '<top level>'}: {d.message}"
                         + (f" [{d.flag}]" if d.flag else ""))
        for d in r.fixed_warnings:
            lines.append(f"    fixed {d.kind}: {d.file}: {d.function or '<top level>'}: {d.message}"
                         + (f" [{d.flag}]" if d.flag else ""))
        for k in r.kselftests:
            lines.append(f"    kselftest {k.target}:{k.test}: {k.status}")
        if r.directories:
            lines.append(f"    built directories: {' '.join(r.directories)}")
        for symbol in r.new_symbols:
            lines.append(f"    new Kconfig symbol {symbol}")
        if r.exercises:
            lines.append(f"    exercises: {', '.join(r.exercises)}")
        if r.kind == "boot" and r.status != "skip":
            lines += _coverage_lines(r.coverage)
        if r.fingerprint:
            seen = f" (seen before on {', '.join(c[:12] for c in r.seen_before)})" if r.seen_before else ""
            lines.append(f"    fingerprint {r.fingerprint}{seen}")
        if r.status in ("fail", "error") and r.log:
            lines.append(f"    {'console' if r.kind == 'boot' else 'log'}: {r.log}")
    first = first_failing_boot(results)
    if first and sum(r.kind == "boot" for r in results) > 1:
        where = f"patch {first['patch']}" if first["patch"] is not None else "the head"
        lines.append(f"first failing boot: {where} {first['commit'][:12]}: {first['fingerprint']}")
    wrapped = []
    for line in lines:   # at most TEXT_WIDTH columns, as the findings above them; paths stay whole
        indent = line[:len(line) - len(line.lstrip())]
        wrapped += wrap(line.strip(), TEXT_WIDTH, indent, indent + "    ", split_words=False)
    return "\n".join(wrapped)


def _coverage_lines(functions: list[FunctionCoverage]) -> list[str]:
    lines = [f"    coverage: {coverage.summary(functions)}"]
    for patch in sorted({p for f in functions for p in f.patches}):
        lines.append(f"      patch {patch}: " + "; ".join(f.describe() for f in functions if patch in f.patches))
    return lines


def exit_code(results: list[JobResult]) -> int:
    return 1 if any(r.status in ("fail", "error") for r in results) else 0


def to_terse(results: list[JobResult]) -> list[str]:
    """checkpatch-like lines: each new compiler diagnostic, and each failed job without a location."""
    lines = []
    for r in results:
        for d in r.new_warnings:
            lines.append(f"{d.file}:{d.line}: {d.kind}: build{'(' + d.flag + ')' if d.flag else ''}: {d.message}")
        if r.status in ("fail", "error") and not r.new_warnings:
            lines.append(f"-:0: error: {r.kind}: {_title(r)}: {r.reason}")
    return lines


def to_sarif_results(results: list[JobResult]) -> list[dict]:
    """New compiler diagnostics as SARIF results (the part of a job result that has a location)."""
    return [{"ruleId": f"compiler{d.flag or '-error'}", "level": d.kind,
             "message": {"text": d.message + (f" (in {d.function})" if d.function else "")},
             "locations": [{"physicalLocation": {"artifactLocation": {"uri": d.file},
                                                 "region": {"startLine": d.line}}}],
             "properties": {"patch": r.patch, "commit": r.commit}}
            for r in results for d in r.new_warnings]
