"""`patchbench apply SOURCE --tree DIR`: apply the selected series, one commit per patch, in isolation.

The commits stay reachable from refs/patchbench/<series message-id>/<base>-<diffs digest> in DIR; the user's HEAD,
index, work tree, branches and stash are left as they were. `git log <ref>` shows them;
`git update-ref -d <ref>` (or `git for-each-ref refs/patchbench/`) to clean up.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from patchbench.mail.limits import InputLimits, human_size, parse_size
from patchbench.series import Series, load_series
from patchbench.tree import ApplyResult, apply_series


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("apply", help="apply the selected series to a git tree without touching its checkout",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_apply_arguments(parser)
    parser.add_argument("--signoff", action="store_true", help="add your Signed-off-by, as git am --signoff does")
    parser.add_argument("--add-link", action="store_true",
                        help="add Link: https://patch.msgid.link/<message-id> to each commit, as b4 am -l does")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=run)


def add_apply_arguments(parser, ranges: bool = False) -> None:
    """SOURCE, --tree, --base and --version: every command that applies a series takes these.

    `ranges`: the command also takes a commit range A..B of the tree as SOURCE."""
    parser.add_argument("source", metavar="SOURCE", help='mbox, maildir, message, directory of *.patch, .gz, or "-"'
                        + (", or a commit range A..B of the tree" if ranges else ""))
    parser.add_argument("--tree", metavar="DIR", default=".", help="the kernel git repository (default: .)")
    parser.add_argument("--base", metavar="REV", help="apply onto REV instead of the series' base-commit:")
    parser.add_argument("--version", type=int, metavar="N", help="pick version N of the series instead of the newest")
    add_input_limit_arguments(parser)


def add_input_limit_arguments(parser) -> None:
    """--max-input-size and friends: how much mail a command reads before refusing the source."""
    limits = parser.add_argument_group("input limits (far above any real mailbox; past one, exit 2)")
    default = InputLimits()
    for flag, name, kind, what in (
        ("--max-input-size", "max_input_size", _size, "bytes of mail after decompression"),
        ("--max-messages", "max_messages", _count, "messages"),
        ("--max-header-size", "max_header_size", _size, "bytes in one message's header block"),
        ("--max-line-length", "max_line_length", _size, "bytes in one line"),
    ):
        value = getattr(default, name)
        shown = human_size(value) if kind is _size else f"{value:,}"
        limits.add_argument(flag, dest=name, type=kind, default=value, metavar="N",
                            help=f"at most N {what} (default {shown}; K, M, G suffixes)" if kind is _size
                            else f"at most N {what} (default {shown})")


def input_limits(args) -> InputLimits:
    return InputLimits(args.max_input_size, args.max_messages, args.max_header_size, args.max_line_length)


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 512M, 2G)") from None


def _count(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"not a positive count: {text!r}")
    return int(text)


def apply_from_args(args, signoff: bool = False, add_link: bool = False) -> tuple[Series, ApplyResult]:
    """Load and apply the series `add_apply_arguments` describes; warnings go to stderr."""
    series = load_series(args.source, args.version, input_limits(args))
    result = apply_series(series, Path(args.tree), args.base, signoff=signoff, add_link=add_link)
    for warning in result.warnings:
        print(f"patchbench: warning: {warning}", file=sys.stderr)
    return series, result


def run(args) -> int:
    series, result = apply_from_args(args, signoff=args.signoff, add_link=args.add_link)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(summary(result, len(series.patches)))
    return 1 if result.failed else 0


def summary(result: ApplyResult, total: int) -> str:
    lines = [f"base {result.base} ({result.base_reason})"]
    for patch in result.applied:
        merge = " (3-way merge)" if patch.three_way else ""
        lines.append(f"[{patch.index}/{total}] {patch.commit[:12]} {patch.subject}{merge}")
    if result.failed:
        where = ", ".join(part for part in (result.failed.file, result.failed.hunk) if part)
        lines.append(f"[{result.failed.index}/{total}] does not apply{': ' + where if where else ''}")
        lines.append(f"    {result.failed.reason}")
    if result.ref:
        kept = "applied so far" if result.failed else "applied series"
        lines.append(f"{kept}: {result.ref} (head {result.head[:12]})")
    return "\n".join(lines)
