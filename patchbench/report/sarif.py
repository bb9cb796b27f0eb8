"""SARIF 2.1.0 log of checker findings (one run, the rules as reportingDescriptors).

Each result carries its location (file, line), the function as a logical location, a
partialFingerprint of `Finding.identity()` so that code-scanning services match a finding across
line shifts as patchbench does, and the introducing patch as a property for series checks.
"""

from __future__ import annotations

import hashlib

from patchbench import __version__
from patchbench.checks import engine
from patchbench.checks.finding import Finding

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVELS = {"error": "error", "warning": "warning", "note": "note"}


def _descriptor(rule) -> dict:
    return {"id": rule.ID, "name": rule.ID,
            "shortDescription": {"text": rule.MESSAGE},
            "defaultConfiguration": {"level": _LEVELS.get(rule.SEVERITY, "warning")}}


def _locations(finding: Finding) -> list[dict]:
    """Where the finding is; none for one about a commit message (the netdev checks' signoff, ...)."""
    location: dict = {}
    if finding.file:
        location["physicalLocation"] = {"artifactLocation": {"uri": finding.file},
                                        "region": {"startLine": max(1, finding.line)}}
    if finding.function:
        location["logicalLocations"] = [{"name": finding.function, "kind": "function"}]
    return [location] if location else []


def _result(finding: Finding, rule_index: dict[str, int]) -> dict:
    identity = "\0".join(finding.identity())
    result = {
        "ruleId": finding.rule,
        "level": _LEVELS.get(finding.severity, "warning"),
        "message": {"text": finding.message},
        "locations": _locations(finding),
        "partialFingerprints": {"patchbenchIdentity/v1": hashlib.sha1(identity.encode()).hexdigest()},
    }
    if finding.rule in rule_index:
        result["ruleIndex"] = rule_index[finding.rule]
    if finding.patch is not None:
        result["properties"] = {"patch": finding.patch}
    return result


def to_sarif(findings: list[Finding]) -> dict:
    rules = engine.rules()
    rule_index = {rule.ID: i for i, rule in enumerate(rules)}
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "patchbench", "version": __version__,
                                "rules": [_descriptor(rule) for rule in rules]}},
            "columnKind": "utf16CodeUnits",
            "results": [_result(f, rule_index) for f in findings],
        }],
    }
