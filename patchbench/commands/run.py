"""`patchbench run SOURCE --tree DIR [--build] [--boot]`: the whole pipeline in one report.

load the series → apply it in isolation → static checks per patch → build jobs (objects each patch
touched, W=1 before and after) and, with --boot, the head's kernel booted in QEMU with the smoke test.
"""

from __future__ import annotations

import json

from patchbench.commands.apply import add_apply_arguments
from patchbench.commands.build import add_dispatch_arguments, add_boot_arguments, \
    check_dispatch_arguments, dispatch
from patchbench.errors import BadInput
from patchbench.report import jobs as jobs_report
from patchbench.commands.check import add_check_arguments, apply_and_check
from patchbench.report.findings import FORMATS, render


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("run", help="apply, check, build and boot a series; one report")
    add_apply_arguments(parser)
    add_check_arguments(parser)
    parser.add_argument("--build", action="store_true", help="compile each patch's touched objects (W=1)")
    parser.add_argument("--boot", action="store_true", help="build the head's kernel and boot it in QEMU")
    add_dispatch_arguments(parser, formats=FORMATS)
    add_boot_arguments(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    if args.kselftest and not args.boot:
        raise BadInput("--kselftest runs in the boot guest: add --boot")
    if args.boot_each and not args.boot:
        raise BadInput("--boot-each says which patches boot: add --boot")
    if args.build or args.boot:
        check_dispatch_arguments(args)
    checked = apply_and_check(args)
    applied = checked.applied
    results = []
    if (args.build or args.boot) and applied.applied:
        results = dispatch(applied, args, objects=args.build, kernel=args.boot, boot=args.boot,
                           boot_each=args.boot_each, count_calls=not args.no_coverage,
                           exercise=not args.no_exercise, kselftests=tuple(args.kselftest))
    report = render(checked.report, args.format, args.explain)
    if args.format == "json":
        report = json.dumps({**json.loads(report), "jobs": jobs_report.to_json(results),
                             "first_failing_boot": jobs_report.first_failing_boot(results)}, indent=2)
    elif args.format == "sarif":
        sarif = json.loads(report)
        sarif["runs"][0]["results"] += jobs_report.to_sarif_results(results)
        report = json.dumps(sarif, indent=2)
    elif args.format == "terse":
        report = "\n".join(filter(None, [report, *jobs_report.to_terse(results)]))
    elif results:
        report += "\n" + jobs_report.to_text(results)
    print(report)
    return 1 if checked.checked.findings or applied.failed or jobs_report.exit_code(results) else 0
