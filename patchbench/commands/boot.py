"""`patchbench boot SOURCE|A..B --tree DIR`: build the head's kernel, boot it under QEMU, run the smoke test."""

from __future__ import annotations

import sys

from patchbench.commands.apply import add_apply_arguments
from patchbench.commands.build import add_dispatch_arguments, add_kselftest_argument, \
    applied_from, check_dispatch_arguments, dispatch, print_results


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("boot", help="build the series head, boot it in QEMU and run the smoke test")
    add_apply_arguments(parser, ranges=True)
    add_dispatch_arguments(parser)
    add_kselftest_argument(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    check_dispatch_arguments(args)
    applied = applied_from(args)
    if applied.failed is not None:
        print(f"patchbench: patch {applied.failed.index} does not apply: {applied.failed.reason}", file=sys.stderr)
    results = dispatch(applied, args, objects=False, kernel=True, boot=True,
                       kselftests=tuple(args.kselftest))
    code = print_results(applied, results, args.format)
    return 1 if applied.failed is not None else code
