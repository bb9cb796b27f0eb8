"""Functions written the way 2026 netdev code is: cleanup.h guards, the netdev instance lock,
rtnl_net_lock, devlink and wiphy locks, netdev_queues.h macros, RCU next to RTNL.

Each function in fixtures/checks/idioms/ carries, in the comment above it, what a reviewer expects
of it: `expect: none` or `expect: <rule id>[, <rule id>]`. The test compares the rules the checker
reports in that function with that expectation, function by function, so a false alarm fails as
surely as a miss. The files are our own writing; they show the rules know the idioms, not how
well they do on real code (tests/test_realbugs.py and bench/realbugs.py measure that).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from patchbench.checks.run import checkfile

IDIOMS = Path(__file__).resolve().parents[1] / "fixtures" / "checks" / "idioms"
EXPECT = re.compile(r"expect: ([\w, -]+?) \*/\n(?:[^\n]*\n)*?[^\n(]*?\b(\w+)\(", re.M)


def expectations(path: Path) -> dict[str, set[str]]:
    """function -> the rule ids expected in it (empty: nothing)."""
    found = {}
    for match in EXPECT.finditer(path.read_text()):
        rules = {r.strip() for r in match.group(1).split(",")}
        found[match.group(2)] = set() if rules == {"none"} else rules
    return found


CASES = [(path.name, function, rules) for path in sorted(IDIOMS.glob("*.c"))
         for function, rules in expectations(path).items()]
# What the checker gets wrong today, and why (strict: a fix flips the test until the line goes).
KNOWN_WRONG = {
}


def test_every_idiom_file_states_its_expectations():
    per_file = {path.name: expectations(path) for path in IDIOMS.glob("*.c")}
    assert all(per_file.values()), per_file
    assert len(CASES) >= 40
    assert sum(bool(rules) for _, _, rules in CASES) >= 15     # bugs as well as correct code


_reports: dict[str, dict[str, set[str]]] = {}


def reported(name: str) -> dict[str, set[str]]:
    if name not in _reports:
        by_function: dict[str, set[str]] = {}
        for finding in checkfile.check_source(f"fixtures/checks/idioms/{name}", (IDIOMS / name).read_bytes()):
            by_function.setdefault(finding.function, set()).add(finding.rule)
        _reports[name] = by_function
    return _reports[name]


def _param(name: str, function: str, rules: set[str]):
    why = KNOWN_WRONG.get((name, function))
    marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
    return pytest.param(name, function, rules, id=f"{name}:{function}", marks=marks)


@pytest.mark.parametrize("name,function,rules", [_param(*case) for case in CASES])
def test_function_is_judged_as_a_reviewer_would(name, function, rules):
    assert reported(name).get(function, set()) == rules


def test_no_finding_outside_the_judged_functions():
    for path in IDIOMS.glob("*.c"):
        judged = set(expectations(path))
        assert set(reported(path.name)) <= judged, path.name
