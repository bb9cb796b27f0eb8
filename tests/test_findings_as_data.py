"""A finding is data: its identity and SARIF fingerprint come from the rule, function, message name
and arguments, never from the rendered text, and the related line a report quotes is a field.

Every rule's message templates are reworded here; every finding of every rule keeps its identity
and fingerprint, while its text changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchbench.checks.run import checkfile
from patchbench.checks.engine import registry
from patchbench.report.findings import lint_report, render
from patchbench.report.sarif import fingerprint

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checks"


def _all_findings() -> list:
    found = []
    for path in sorted(FIXTURES.rglob("*.c")):
        found.extend(checkfile.check_source(str(path.relative_to(FIXTURES)), path.read_bytes(),
                                            {module.ID for module in registry.rules()}))
    return found


def _reworded(template: str) -> str:
    return "in other words, " + template + " (reworded)"


def test_rewording_every_message_keeps_identities_and_fingerprints(monkeypatch):
    before = _all_findings()
    assert {f.rule for f in before} == {module.ID for module in registry.rules()}, \
        "the fixtures must give findings of every rule, or rewording proves nothing for the others"
    for module in registry.rules():
        monkeypatch.setattr(module, "MESSAGES", {kind: _reworded(text) for kind, text in module.MESSAGES.items()})
    after = _all_findings()
    assert len(after) == len(before)
    for old, new in zip(before, after):
        assert new.message != old.message and new.message.startswith("in other words, ")
        assert new.identity() == old.identity()
        assert fingerprint(new) == fingerprint(old)


def test_arguments_decide_identity_and_lines_do_not():
    source = (FIXTURES / "lock" / "imbalance_bugs.c").read_bytes()
    here = checkfile.check_source("imbalance_bugs.c", source)
    shifted = checkfile.check_source("imbalance_bugs.c", b"\n\n" + source)
    assert here and [f.identity() for f in here] == [f.identity() for f in shifted]
    assert [f.line + 2 for f in here] == [f.line for f in shifted]


@pytest.mark.parametrize("rule, what", [("lock-imbalance", "lock taken"),
                                        ("rcu-pointer-escapes", "read-side section ended"),
                                        ("queue-wake-wrong-queue", "queue stopped")])
def test_the_related_line_is_a_field_naming_the_right_source_line(rule, what):
    found = [f for f in _all_findings() if f.rule == rule and f.related is not None]
    assert found, f"no {rule} finding with a related line in the fixtures"
    words = {"lock taken": ("lock", "guard", "_disable", "down"), "read-side section ended": ("unlock",),
             "queue stopped": ("stop",)}[what]
    for finding in found:
        assert finding.related.what == what
        line = (FIXTURES / finding.file).read_text().split("\n")[finding.related.line - 1]
        assert any(word in line.lower() for word in words), (finding, line)


def test_an_rcu_finding_names_its_ways_in_and_explain_shows_them():
    """Each rcu-deref-unprotected finding says how its function is entered (registrations with the
    context the facts table gives them, callers), so that a reviewer can confirm it; text shows
    that only with --explain, json carries it always."""
    found = [f for f in _all_findings() if f.rule == "rcu-deref-unprotected"]
    assert found
    assert all(f.because and all(r.startswith(("way in: ", "no way in is known", "way in lacking it: "))
                                 for r in f.because) for f in found)
    # the way in that lacks the protection comes first, as the chain from a registration down
    chains = [r for f in found for r in f.because[:1] if r.startswith("way in lacking it: ")]
    assert any("(registered as " in r and " -> " in r and " at line " in r for r in chains), chains
    registered = [f for f in found if any(r.startswith("way in: registered as .") for r in f.because)]
    assert registered, "the fixtures have registered RCU readers"
    report = lint_report(registered[:1], [registered[0].file])
    assert "because: way in: registered as ." in render(report, "text", explain=True)
    assert "because:" not in render(report, "text")
    assert json.loads(render(report, "json"))["findings"][0]["because"] == list(registered[0].because)


def test_every_rule_says_what_decided_its_findings():
    """Every finding of every rule carries its explanation: the ways into its function, and for
    the families that decide by more than the ways in, the facts of the verdict (the lock's key and
    the returns holding it; the queue's completion side and the wakes that did not count; the ring
    lock's paths)."""
    found = _all_findings()
    for finding in found:
        assert any(r.startswith(("way in: ", "no way in is known")) for r in finding.because), finding
    stated = {"lock-imbalance": "lock ", "queue-stop-unmatched": "completion side in this file: ",
              "ptr-ring-consume-unlocked": "not only reached from ways in that run one at a time"}
    for rule, opening in stated.items():
        assert any(r.startswith(opening) for f in found if f.rule == rule for r in f.because), rule
    wakes = [r for f in found if f.kind.startswith("unmatched") for r in f.because if r.startswith("wake at line")]
    assert any(r.endswith("not on the completion side (open, reset or deferred work)") for r in wakes), wakes
