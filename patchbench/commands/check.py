"""`patchbench check SOURCE --tree DIR`: apply the series, then report the findings each patch adds.

Application is `patchbench apply`'s (private index, commits in DIR's object store, the checkout
untouched); the analysis reads the blobs of each patch's parent and commit (patchbench.checks.patches),
and the netdev per-patch checks run on the commits (patchbench.patchchecks). `--checks` picks them.
"""

from __future__ import annotations

import json
import time

from patchbench import patchchecks
from patchbench.checks import engine
from patchbench.checks.patches import PatchCheck, SeriesCheck, check_applied
from patchbench.commands.apply import add_apply_arguments, apply_from_args
from patchbench.report.findings import FORMATS, render_check
from patchbench.tree import ApplyResult


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("check", help="apply a series and report the findings new in each patch")
    add_apply_arguments(parser)
    add_check_arguments(parser)
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    parser.set_defaults(func=run)


def add_check_arguments(parser) -> None:
    """--checks and the checks' options: `check` and `run` take these."""
    parser.add_argument("--checks", metavar="LIST", default="all",
                        help="comma-separated rule and check ids, or 'rules' (the static rules), 'netdev' "
                             "(signoff, fixes-tag, checkpatch, maintainers, kdoc, series-shape, source-hygiene), "
                             "'all' (default)")
    parser.add_argument("--checkpatch-strict", action="store_true", help="run checkpatch.pl with --strict")


def _static_rules(applied: ApplyResult, rules: set[str]) -> tuple[SeriesCheck, patchchecks.CheckRun]:
    start = time.monotonic()
    if rules:
        checked = check_applied(applied)
        for patch in checked.patches:
            patch.new = [f for f in patch.new if f.rule in rules]
    else:
        checked = SeriesCheck(applied.base, [PatchCheck(p.index, p.commit, []) for p in applied.applied])
    status, reason = ("ran", "") if rules else ("skipped", "not selected")
    return checked, patchchecks.CheckRun(patchchecks.RULES_GROUP, status, time.monotonic() - start, reason,
                                         checked.findings)


def apply_and_check(args) -> tuple[ApplyResult, SeriesCheck, list[patchchecks.CheckRun]]:
    """Load the series named by `args`, apply it in isolation and check each patch (shared with `run`).

    `args` without `add_check_arguments`' options (another command's parser) runs every check."""
    rules, check_ids = patchchecks.select(getattr(args, "checks", "all"), [rule.ID for rule in engine.rules()])
    series, applied = apply_from_args(args)
    checked, static = _static_rules(applied, rules)
    runs = patchchecks.check_series(series, applied, check_ids,
                                    patchchecks.Options(checkpatch_strict=getattr(args, "checkpatch_strict", False)))
    patchchecks.add_findings(checked, runs)
    return applied, checked, [static, *runs]


def render(applied: ApplyResult, checked: SeriesCheck, runs: list[patchchecks.CheckRun], fmt: str) -> str:
    """The check report, with each check's time (json) and the checks that were skipped (text)."""
    report = render_check(applied, checked, fmt)
    if fmt == "json":
        report = json.dumps({**json.loads(report), "checks": [r.to_json() for r in runs]}, indent=2)
    elif fmt == "text":
        report += "".join(f"\n{r.id} skipped: {r.reason}" for r in runs if r.status == "skipped"
                          and r.reason != "not selected")
    return report


def run(args) -> int:
    applied, checked, runs = apply_and_check(args)
    output = render(applied, checked, runs, args.format)
    if output:
        print(output)
    return 1 if checked.findings or applied.failed else 0
