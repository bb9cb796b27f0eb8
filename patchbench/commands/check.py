"""`patchbench check SOURCE --tree DIR`: apply the series, then report the findings each patch adds.

Application is `patchbench apply`'s (private index, commits in DIR's object store, the checkout
untouched); the analysis reads the blobs of each patch's parent and commit (patchbench.checks.patches),
and the netdev per-patch checks run on the commits (patchbench.patchchecks). `--checks` picks them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from patchbench import patchchecks
from patchbench.checks.engine import registry
from patchbench.checks.run.series import PatchCheck, SeriesCheck, check_applied
from patchbench.commands.apply import add_apply_arguments, apply_from_args
from patchbench.commands.runner_options import add_runner_arguments
from patchbench.errors import BadInput
from patchbench.report.findings import FORMATS, Report, render, series_report
from patchbench.report.progress import Progress
from patchbench.series import Series
from patchbench.tree import ApplyResult


@dataclass
class CheckRun:
    """Everything `check` (and `run`) learnt about the series."""
    series: Series
    applied: ApplyResult
    checked: SeriesCheck
    report: Report


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("check", help="apply a series and report the findings new in each patch")
    add_apply_arguments(parser)
    add_check_arguments(parser)
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="output format: text, mail (a reply body to paste), terse, json, sarif (default: text)")
    add_runner_arguments(parser)
    parser.set_defaults(func=run)


def add_check_arguments(parser) -> None:
    """--checks and the checks' options: `check` and `run` take these."""
    parser.add_argument("--checks", metavar="LIST", default="all",
                        help="comma-separated rule and check ids, or 'rules' (the default static rules), "
                             "'netdev' (the per-patch checks that do not build), 'builds' (32-bit, clang, "
                             "tools and ynl builds), 'all' (default: rules and netdev)")
    parser.add_argument("--checkpatch-strict", action="store_true", help="run checkpatch.pl with --strict")
    parser.add_argument("--explain", action="store_true",
                        help="with each finding, what decided it (the ways into its function, ...)")


def _static_rules(args, applied: ApplyResult, rules: set[str]) -> tuple[SeriesCheck, patchchecks.CheckRun]:
    """The tree-sitter rules selected, on this machine or (`--runner celery`) a job per patch on the farm."""
    start = time.monotonic()
    if not rules:
        checked = SeriesCheck(applied.base, [PatchCheck(p.index, p.commit, []) for p in applied.applied])
    elif getattr(args, "runner", "local") == "local":   # callers other than check/run have no farm
        # a rule run only when named widens what is computed; otherwise the default rules (cached)
        named_only = rules - set(registry.default_rule_ids())
        checked = check_applied(applied, rule_ids=frozenset(rules) if named_only else None)
    else:
        from patchbench.commands.build import check_on_runner   # the dispatch stage, only for a farm

        checked = check_on_runner(applied, args)
    for patch in checked.patches:
        patch.new = [f for f in patch.new if f.rule in rules]
    status, reason = ("ran", "") if rules else ("skipped", "not selected")
    return checked, patchchecks.CheckRun(patchchecks.RULES_GROUP, status, time.monotonic() - start, reason,
                                         checked.findings)


def apply_and_check(args) -> CheckRun:
    """Load the series named by `args`, apply it in isolation and check each patch (shared with `run`).

    `args` without `add_check_arguments`' options (another command's parser) runs every check."""
    started = time.monotonic()
    rules, check_ids = patchchecks.select(getattr(args, "checks", "all"), [rule.ID for rule in registry.rules()],
                                          registry.default_rule_ids())
    if rules - set(registry.default_rule_ids()) and getattr(args, "runner", "local") != "local":
        # said before anything is applied
        raise BadInput("--checks: the rules run only when named do not run on a farm yet (--runner local)")
    with Progress("check", args.format) as progress:
        progress.stage("reading and applying the series")
        series, applied = apply_from_args(args)
        files = {path for patch in applied.applied for path in patch.files}
        progress.stage(f"checking {len(applied.applied)} applied patches ({len(files)} files)")
        checked, static = _static_rules(args, applied, rules)
        runs = patchchecks.check_series(series, applied, check_ids, patchchecks.Options(
            checkpatch_strict=getattr(args, "checkpatch_strict", False)))
        patchchecks.add_findings(checked, runs)
    return CheckRun(series, applied, checked, series_report(series, applied, checked, time.monotonic() - started,
                                                            [static, *runs]))


def run(args) -> int:
    result = apply_and_check(args)
    output = render(result.report, args.format, args.explain)
    if output:
        print(output)
    return 1 if result.checked.findings or result.applied.failed else 0
