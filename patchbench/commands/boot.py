"""`patchbench boot SOURCE|A..B --tree DIR [--boot-each]`: build the head's kernel (or every patch's),
boot it under QEMU, run the smoke test and the exercises chosen for what the series touches, and count
calls of the functions it changed."""

from __future__ import annotations

import sys

from patchbench.commands.apply import add_apply_arguments
from patchbench.commands.build import add_dispatch_arguments, add_boot_arguments, \
    applied_from, check_dispatch_arguments, dispatch, print_results


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("boot", help="build the series head, boot it in QEMU and run the smoke test")
    add_apply_arguments(parser, ranges=True)
    add_dispatch_arguments(parser)
    add_boot_arguments(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    check_dispatch_arguments(args)
    applied = applied_from(args)
    if applied.failed is not None:
        print(f"patchbench: patch {applied.failed.index} does not apply: {applied.failed.reason}", file=sys.stderr)
    results = dispatch(applied, args, objects=False, kernel=True, boot=True, boot_each=args.boot_each,
                       count_calls=not args.no_coverage, exercise=not args.no_exercise, kselftests=tuple(args.kselftest))
    code = print_results(applied, results, args.format)
    return 1 if applied.failed is not None else code
