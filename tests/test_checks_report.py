"""Finding reports and the lint command: formats, SARIF 2.1.0 structure, exit codes, cache."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from patchbench.checks.run import checkfile
from patchbench.checks.engine import registry
from patchbench.checks.engine.finding import Finding
from patchbench.cli import main
from patchbench.report import sarif
from patchbench.report.findings import Checked, FailedPatch, PatchLine, Report, SeriesHeader, render
from patchbench.report.quote import Context, Related

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
                        "relatedLocations": {"type": "array", "items": {"type": "object", "properties": {
                            "id": {"type": "integer", "minimum": -1},
                            "message": {"type": "object", "required": ["text"]}}}},
                        "partialFingerprints": {"type": "object", "additionalProperties": {"type": "string"}},
                        "properties": {"type": "object"},
                    }}},
                "invocations": {"type": "array", "items": {
                    "type": "object", "required": ["executionSuccessful"],
                    "properties": {
                        "executionSuccessful": {"type": "boolean"},
                        "toolExecutionNotifications": {"type": "array", "items": {
                            "type": "object", "required": ["message"],
                            "properties": {"level": {"enum": ["none", "note", "warning", "error"]},
                                           "message": {"type": "object", "required": ["text"]}}}}}}},
                "columnKind": {"enum": ["utf16CodeUnits", "unicodeCodePoints"]},
            }}},
    },
}

FINDINGS = [
    Finding("lock-imbalance", "error", "drivers/net/a.c", 12, "a_set", "spin_lock(&d->lock) taken in a_set() is still held at this return", 1),
    Finding("ptr-ring-consume-unlocked", "warning", "drivers/net/b.c", 40, "b_poll", "__ptr_ring_empty(r) without r's consumer_lock held here or in every caller", 2),
]


def lint_report(findings, contexts=()) -> Report:
    return Report(findings, list(contexts))


def test_sarif_has_the_required_structure_and_every_rule():
    log = json.loads(render(lint_report(FINDINGS), "sarif"))
    jsonschema.validate(log, SARIF_REQUIRED)
    driver = log["runs"][0]["tool"]["driver"]
    ids = [rule["id"] for rule in driver["rules"]]
    assert {"lock-imbalance", "ptr-ring-consume-unlocked", "ptr-ring-produce-unlocked"} <= set(ids)
    results = log["runs"][0]["results"]
    assert [ids[r["ruleIndex"]] for r in results] == [r["ruleId"] for r in results]
    assert results[1]["level"] == "warning" and results[1]["properties"] == {"patch": 2}
    assert results[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 12
    assert log["runs"][0]["invocations"] == [{"executionSuccessful": True}]


def test_sarif_fingerprint_follows_identity_not_line():
    moved = Finding(**{**FINDINGS[0].__dict__, "line": 99})
    first, second = (sarif.to_sarif([f])["runs"][0]["results"][0]["partialFingerprints"] for f in (FINDINGS[0], moved))
    assert first == second


SERIES_PATCHES = [PatchLine(1, "a" * 40, "[PATCH net v2 1/3] one"), PatchLine(2, "b" * 40, "[PATCH net v2 2/3] two"),
                  PatchLine(3, "c" * 40, "[PATCH net v2 3/3] three")]
HEADER = SeriesHeader("[PATCH net v2 0/3] the series", 3, "net", "f" * 40, "base-commit: from the series")
CONTEXTS = [Context("\t\treturn -EINVAL;", Related("lock taken", 10, "\tspin_lock(&d->lock);")),
            Context("\tlen = __ptr_ring_empty(r);")]


def test_json_check_shape_and_terse_lines():
    report = Report(FINDINGS, CONTEXTS, HEADER, SERIES_PATCHES, checked=Checked(3, ["drivers/net/a.c"], ["r"]))
    data = json.loads(render(report, "json"))
    assert data["base"] == "f" * 40 and data["series"]["name"] == "[PATCH net v2 0/3] the series"
    assert [p["new_findings"] for p in data["patches"]] == [1, 1, 0]
    assert set(data["findings"][0]) >= {"rule", "severity", "file", "line", "function", "patch", "message"}
    assert data["findings"][0]["related"] == {"what": "lock taken", "line": 10, "text": "\tspin_lock(&d->lock);"}
    assert "seconds" not in data["checked"]   # machine formats are the same run to run
    assert "patch" not in json.loads(render(lint_report(FINDINGS), "json"))["findings"][0]
    assert render(lint_report(FINDINGS), "terse").splitlines()[1] == (
        "drivers/net/b.c:40: warning: ptr-ring-consume-unlocked: "
        "__ptr_ring_empty(r) without r's consumer_lock held here or in every caller")
    assert render(report, "terse").splitlines()[1].startswith(
        "drivers/net/b.c:40: warning: ptr-ring-consume-unlocked: patch 2/3: __ptr_ring_empty(r)")
    text = render(report, "text")
    assert "[PATCH net v2 3/3] three\n  no new findings" in text
    assert "cccccccccccc" not in text   # patches are named as posted, not by local commit


def _width(text: str) -> int:
    return max(len(line.expandtabs(8)) for line in text.splitlines())


def test_text_and_mail_stay_within_their_widths_and_quote_the_lines():
    long = Finding("rcu-pointer-escapes", "error", "drivers/net/ethernet/some/very/long/path/to/driver_main.c", 1234,
                   "a_function_with_a_rather_long_name",
                   "'dev' (from rcu_dereference() inside the read-side section) is dereferenced after the section "
                   "ended; use it before the unlock or take a reference inside " * 2, 2)
    code = "\t\t\t\tnetif_tx_wake_all_queues(some_structure->some_member->dev); /* " + "x" * 80 + " */"
    shown = Context(code, Related("read-side section ended", 1230, "\t\t\t\trcu_read_unlock();"))
    report = Report([long], [shown], HEADER, SERIES_PATCHES, checked=Checked(3, ["a.c"], ["r"] * 30, 1.25))
    text, mail = render(report, "text"), render(report, "mail")
    assert _width(text) <= 100 and _width(mail) <= 72
    assert "Checked 3 patches, 1 C file, 30 rules in 1.2 s: 1 new finding." in text
    quoted = [line for line in mail.splitlines() if line.startswith(">")]
    assert quoted[0].startswith("> netif_tx_wake_all_queues(some_structure->some_member->dev);")
    assert quoted[1] == ">                                 rcu_read_unlock();"
    assert "Read-side section ended at line 1230:" in mail
    assert "[PATCH net v2 2/3] two" in " ".join(mail.split())
    assert "\n-- \n" in mail   # the summary is below a signature separator


def test_a_patch_that_does_not_apply_is_named_with_its_hunk():
    failed = FailedPatch(2, "[PATCH net v2 2/3] two", "drivers/net/b.c", "@@ -2180,7 +2180,9 @@",
                         "patch does not apply")
    report = Report([], [], HEADER, SERIES_PATCHES[:1], failed, Checked(1, [], ["r"]))
    assert render(report, "terse") == ("drivers/net/b.c:2180: error: apply: patch 2/3 does not apply at hunk "
                                       "@@ -2180,7 +2180,9 @@: [PATCH net v2 2/3] two: patch does not apply")
    assert "patches 3 to 3" not in render(report, "text") and "patch 3 was not applied" in render(report, "text")
    log = json.loads(render(report, "sarif"))
    jsonschema.validate(log, SARIF_REQUIRED)
    run = log["runs"][0]
    assert run["invocations"][0]["executionSuccessful"] is False
    assert "[PATCH net v2 2/3] two does not apply" in run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"]
    [result] = run["results"]
    assert result["ruleId"] == "patch-does-not-apply" and result["properties"] == {"patch": 2}
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 2180


def test_lint_exit_codes_and_formats(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATCHBENCH_CACHE", str(tmp_path / "cache"))
    assert main(["lint", str(FIXTURES / "lock" / "imbalance_correct.c"), "--format", "terse"]) == 0
    assert capsys.readouterr().out == ""
    code = main(["lint", str(FIXTURES / "ptr_ring"), str(FIXTURES / "lock"), "--format", "json", "-j", "2"])
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert code == 1
    expected = sum(len(checkfile.check_source(str(p), p.read_bytes()))
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


@pytest.mark.parametrize("fmt", ["text", "mail", "terse", "json", "sarif"])
def test_every_format_renders_an_empty_run(fmt):
    out = render(Report([]), fmt)
    if fmt in ("json", "sarif"):
        json.loads(out)


def test_lint_text_quotes_the_return_and_the_lock_it_still_holds(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATCHBENCH_CACHE", str(tmp_path / "cache"))
    path = FIXTURES / "lock" / "imbalance_bugs.c"
    assert main(["lint", str(path)]) == 1
    text = capsys.readouterr().out
    lines = path.read_text().splitlines()
    assert max(len(line) for line in text.splitlines()) <= 100
    start = text.index(f"{path}:38: error: in bad_goto_past_unlock()")
    block = text[start:text.index(f"\n  {path}", start)]   # up to the next finding
    quoted = [line.split(" | ", 1) for line in block.splitlines() if " | " in line]
    assert [int(n) for n, _ in quoted] == [38, 30]
    assert [code for _, code in quoted] == [lines[37].expandtabs(8), lines[29].expandtabs(8)]
    assert "lock taken:" in block and "mutex_lock(&d->cfg_mutex)" in quoted[1][1]
    assert re.search(rf"^Checked 1 C file, {len(registry.default_rule_ids(lint=True))} rules in \d+\.\d s: 10 findings\.$", text, re.M)
