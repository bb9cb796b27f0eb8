"""Finding reports and the lint command: formats, SARIF 2.1.0 structure, exit codes, cache."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from patchbench.checks import engine
from patchbench.checks.finding import Finding
from patchbench.cli import main
from patchbench.report import sarif
from patchbench.report.findings import PatchLine, render

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checks"

# No PyPI package ships the official SARIF 2.1.0 JSON schema, so this checks the parts of it that
# SARIF consumers rely on, written from the 2.1.0 specification: required properties, types, enums.
SARIF_REQUIRED = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "$schema": {"type": "string", "format": "uri"},
        "runs": {"type": "array", "items": {
            "type": "object",
            "required": ["tool"],
            "properties": {
                "tool": {"type": "object", "required": ["driver"], "properties": {
                    "driver": {"type": "object", "required": ["name"], "properties": {
                        "name": {"type": "string"},
                        "rules": {"type": "array", "items": {
                            "type": "object", "required": ["id"],
                            "properties": {"id": {"type": "string"},
                                           "shortDescription": {"type": "object", "required": ["text"]},
                                           "defaultConfiguration": {"type": "object", "properties": {
                                               "level": {"enum": ["none", "note", "warning", "error"]}}}}}},
                    }}}},
                "results": {"type": "array", "items": {
                    "type": "object",
                    "required": ["message"],
                    "properties": {
                        "ruleId": {"type": "string"},
                        "ruleIndex": {"type": "integer", "minimum": -1},
                        "level": {"enum": ["none", "note", "warning", "error"]},
                        "message": {"type": "object", "anyOf": [{"required": ["text"]}, {"required": ["id"]}],
                                    "properties": {"text": {"type": "string"}}},
                        "locations": {"type": "array", "items": {"type": "object", "properties": {
                            "physicalLocation": {"type": "object", "properties": {
                                "artifactLocation": {"type": "object", "properties": {"uri": {"type": "string"}}},
                                "region": {"type": "object", "properties": {
                                    "startLine": {"type": "integer", "minimum": 1}}}}},
                            "logicalLocations": {"type": "array", "items": {"type": "object", "properties": {
                                "name": {"type": "string"}, "kind": {"type": "string"}}}}}}},
                        "partialFingerprints": {"type": "object", "additionalProperties": {"type": "string"}},
                        "properties": {"type": "object"},
                    }}},
                "columnKind": {"enum": ["utf16CodeUnits", "unicodeCodePoints"]},
            }}},
    },
}

FINDINGS = [
    Finding("lock-imbalance", "error", "drivers/net/a.c", 12, "a_set", "spin_lock(&d->lock) taken in a_set() is still held at this return", 1),
    Finding("ptr-ring-consume-unlocked", "warning", "drivers/net/b.c", 40, "b_poll", "__ptr_ring_empty(r) without r's consumer_lock held here or in every caller", 2),
]


def test_sarif_has_the_required_structure_and_every_rule():
    log = json.loads(render(FINDINGS, "sarif"))
    jsonschema.validate(log, SARIF_REQUIRED)
    driver = log["runs"][0]["tool"]["driver"]
    ids = [rule["id"] for rule in driver["rules"]]
    assert {"lock-imbalance", "ptr-ring-consume-unlocked", "ptr-ring-produce-unlocked"} <= set(ids)
    results = log["runs"][0]["results"]
    assert [ids[r["ruleIndex"]] for r in results] == [r["ruleId"] for r in results]
    assert results[1]["level"] == "warning" and results[1]["properties"] == {"patch": 2}
    assert results[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 12


def test_sarif_fingerprint_follows_identity_not_line():
    moved = Finding(**{**FINDINGS[0].__dict__, "line": 99})
    first, second = (sarif.to_sarif([f])["runs"][0]["results"][0]["partialFingerprints"] for f in (FINDINGS[0], moved))
    assert first == second


def test_json_check_shape_and_terse_lines():
    patches = [PatchLine(1, "a" * 40, "one"), PatchLine(2, "b" * 40, "two"), PatchLine(3, "c" * 40, "three")]
    data = json.loads(render(FINDINGS, "json", patches=patches, base="f" * 40))
    assert data["base"] == "f" * 40
    assert [p["new_findings"] for p in data["patches"]] == [1, 1, 0]
    assert set(data["findings"][0]) >= {"rule", "severity", "file", "line", "function", "patch", "message"}
    assert "patch" not in json.loads(render(FINDINGS, "json"))["findings"][0]
    assert render(FINDINGS, "terse").splitlines()[1] == (
        "drivers/net/b.c:40: warning: ptr-ring-consume-unlocked: "
        "__ptr_ring_empty(r) without r's consumer_lock held here or in every caller")
    text = render(FINDINGS, "text", patches=patches)
    assert "patch 3 cccccccccccc three: no new findings" in text


def test_lint_exit_codes_and_formats(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATCHBENCH_CACHE", str(tmp_path / "cache"))
    assert main(["lint", str(FIXTURES / "lock" / "imbalance_correct.c"), "--format", "terse"]) == 0
    assert capsys.readouterr().out == ""
    code = main(["lint", str(FIXTURES / "ptr_ring"), str(FIXTURES / "lock"), "--format", "json", "-j", "2"])
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert code == 1
    expected = sum(len(engine.check_source(str(p), p.read_bytes()))
                   for p in [*FIXTURES.glob("ptr_ring/*.c"), *FIXTURES.glob("lock/*.c")])
    assert len(findings) == expected >= 15
    assert any(f["rule"] == "lock-imbalance" and f["function"] == "bad_switch_case" for f in findings)
    # a second run reads the cached facts and says the same
    main(["lint", str(FIXTURES / "ptr_ring"), str(FIXTURES / "lock"), "--format", "json"])
    assert json.loads(capsys.readouterr().out)["findings"] == findings
    assert list((tmp_path / "cache").rglob("*.json"))


def test_lint_of_a_missing_path_is_bad_input(tmp_path, capsys):
    assert main(["lint", str(tmp_path / "nope.c")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("patchbench: error: ") and err.count("\n") == 1


@pytest.mark.parametrize("fmt", ["text", "terse", "json", "sarif"])
def test_every_format_renders_an_empty_run(fmt):
    out = render([], fmt)
    if fmt in ("json", "sarif"):
        json.loads(out)
