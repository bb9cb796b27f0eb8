"""`patchbench check SOURCE --tree DIR`: apply the series, then report the findings each patch adds.

Application is `patchbench apply`'s (private index, commits in DIR's object store, the checkout
untouched); the analysis reads the blobs of each patch's parent and commit (patchbench.checks.patches).
"""

from __future__ import annotations

import sys
from pathlib import Path

from patchbench.checks.patches import SeriesCheck, check_applied
from patchbench.report.findings import FORMATS, render_check
from patchbench.series import load_series
from patchbench.tree import ApplyResult, apply_series


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("check", help="apply a series and report the findings new in each patch")
    parser.add_argument("source", metavar="SOURCE", help='mbox, maildir, message, directory of *.patch, .gz, or "-"')
    parser.add_argument("--tree", metavar="DIR", default=".", help="the kernel git repository (default: .)")
    parser.add_argument("--base", metavar="REV", help="apply onto REV instead of the series' base-commit:")
    parser.add_argument("--version", type=int, metavar="N", help="pick version N of the series instead of the newest")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    parser.set_defaults(func=run)


def apply_and_check(args) -> tuple[ApplyResult, SeriesCheck]:
    """Load the series named by `args`, apply it in isolation and check each patch (shared with `run`)."""
    series = load_series(args.source, args.version)
    applied = apply_series(series, Path(args.tree), args.base)
    for warning in applied.warnings:
        print(f"patchbench: warning: {warning}", file=sys.stderr)
    return applied, check_applied(applied)


def run(args) -> int:
    applied, checked = apply_and_check(args)
    output = render_check(applied, checked, args.format)
    if output:
        print(output)
    return 1 if checked.findings or applied.failed else 0
