"""`patchbench check SOURCE --tree DIR`: apply the series, then report the findings each patch adds.

Application is `patchbench apply`'s (private index, commits in DIR's object store, the checkout
untouched); the analysis reads the blobs of each patch's parent and commit (patchbench.checks.patches).
"""

from __future__ import annotations

from patchbench.checks.patches import SeriesCheck, check_applied
import sys

from patchbench.commands.apply import add_apply_arguments, apply_from_args
from patchbench.commands.build import add_runner_arguments, make_runner
from patchbench.dispatch import progress, workspace
from patchbench.dispatch.runner import check_jobs, default_context, series_check
from patchbench.report.findings import FORMATS, render_check
from patchbench.tree import ApplyResult


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("check", help="apply a series and report the findings new in each patch")
    add_apply_arguments(parser)
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    add_runner_arguments(parser)
    parser.set_defaults(func=run)


def apply_and_check(args) -> tuple[ApplyResult, SeriesCheck]:
    """Load the series named by `args`, apply it in isolation and check each patch (shared with `run`).

    With `--runner celery` each patch's check is a job on the farm."""
    _, applied = apply_from_args(args)
    if args.runner == "local":
        return applied, check_applied(applied)
    ctx = default_context(None, workspace.cache_root(), progress.for_stream(sys.stderr))
    results = make_runner(args, None).run(check_jobs(applied), ctx)
    return applied, series_check(applied, results)


def run(args) -> int:
    applied, checked = apply_and_check(args)
    output = render_check(applied, checked, args.format)
    if output:
        print(output)
    return 1 if checked.findings or applied.failed else 0
