"""SARIF 2.1.0 log of checker findings (one run, the rules as reportingDescriptors).

Each result carries its location (file, line, the offending line as a snippet), the function as a
logical location, the related line (where the lock was taken, ...) as a relatedLocation, a
partialFingerprint of `Finding.identity()` so that code-scanning services match a finding across
line shifts as patchbench does, and the introducing patch as a property for series checks.
A series that did not apply is a failed invocation (`executionSuccessful: false`, with a
notification) and a `patch-does-not-apply` result on the patch.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from patchbench import __version__
from patchbench.checks.engine import registry
from patchbench.checks.engine.finding import Finding
from patchbench.report.quote import Context

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVELS = {"error": "error", "warning": "warning", "note": "note"}
APPLY_RULE = "patch-does-not-apply"


@dataclass
class Failure:
    """The patch of a series that did not apply."""
    patch: int
    message: str
    file: str | None
    line: int | None


def _descriptor(rule) -> dict:
    return {"id": rule.ID, "name": rule.ID,
            "shortDescription": {"text": rule.MESSAGE},
            "defaultConfiguration": {"level": _LEVELS.get(rule.SEVERITY, "warning")}}


def _location(file: str, line: int, snippet: str | None = None) -> dict:
    region: dict = {"startLine": max(1, line)}
    if snippet is not None:
        region["snippet"] = {"text": snippet}
    return {"physicalLocation": {"artifactLocation": {"uri": file}, "region": region}}


def fingerprint(finding: Finding) -> str:
    """The partial fingerprint code-scanning services match a finding by across runs: of its
    identity (rule, file, function, message name and arguments), never of the rendered text."""
    return hashlib.sha1(json.dumps(finding.identity()).encode()).hexdigest()


def _result(finding: Finding, shown: Context, rule_index: dict[str, int]) -> dict:
    # A finding about a commit message (the netdev checks') has no file; one about a file no function.
    location = _location(finding.file, finding.line, shown.source) if finding.file else {}
    if finding.function:
        location["logicalLocations"] = [{"name": finding.function, "kind": "function"}]
    result = {
        "ruleId": finding.rule,
        "level": _LEVELS.get(finding.severity, "warning"),
        "message": {"text": finding.message},
        "locations": [location] if location else [],
        "partialFingerprints": {"patchbenchIdentity/v2": fingerprint(finding)},
    }
    if shown.related and finding.file:
        related = _location(finding.file, shown.related.line, shown.related.text)
        result["relatedLocations"] = [{"id": 1, **related, "message": {"text": shown.related.what}}]
    if finding.rule in rule_index:
        result["ruleIndex"] = rule_index[finding.rule]
    if finding.patch is not None:
        result["properties"] = {"patch": finding.patch}
    if finding.because:
        result.setdefault("properties", {})["because"] = list(finding.because)
    return result


def _failure_result(failure: Failure, rule_index: dict[str, int]) -> dict:
    result = {"ruleId": APPLY_RULE, "ruleIndex": rule_index[APPLY_RULE], "level": "error",
              "message": {"text": failure.message}, "properties": {"patch": failure.patch}}
    if failure.file:
        result["locations"] = [_location(failure.file, failure.line or 1)]
    return result


def to_sarif(findings: list[Finding], contexts: list[Context] | None = None,
             failure: Failure | None = None) -> dict:
    rules = registry.rules()
    descriptors = [_descriptor(rule) for rule in rules] + [{
        "id": APPLY_RULE, "name": APPLY_RULE,
        "shortDescription": {"text": "a patch of the series does not apply to the base"},
        "defaultConfiguration": {"level": "error"}}]
    rule_index = {d["id"]: i for i, d in enumerate(descriptors)}
    shown = contexts or [Context()] * len(findings)
    results = [_result(f, c, rule_index) for f, c in zip(findings, shown)]
    invocation: dict = {"executionSuccessful": failure is None}
    if failure is not None:
        results.append(_failure_result(failure, rule_index))
        invocation["toolExecutionNotifications"] = [{
            "level": "error", "message": {"text": failure.message},
            **({"locations": [_location(failure.file, failure.line or 1)]} if failure.file else {})}]
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "patchbench", "version": __version__, "rules": descriptors}},
            "invocations": [invocation],
            "columnKind": "utf16CodeUnits",
            "results": results,
        }],
    }
