"""Command line: one subcommand module each under patchbench/commands, one error contract for all.

Every command module exposes `add_parser(subparsers)` (which sets `func`) and returns an exit code:
0 nothing new found, 1 findings or a patch did not apply, 2 bad input or a checker failure (see
docs/interface.md).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

from patchbench import __version__
from patchbench.errors import BadInput, Failed

COMMANDS = ("series", "apply", "check", "lint", "run", "build", "boot", "results", "hook", "b4-check", "worker",
            "bot")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors follow the same one-line contract
        raise BadInput(message)


def _stop_as_interrupt(signum, frame):
    # Cleanup code runs from `finally` blocks and KeyboardInterrupt handlers; SIGTERM takes that path too.
    # An object the interrupt cut off half-built (GitPython's config parser, say) may fail in its
    # __del__ as the stack unwinds: that is not news to the user, who asked us to stop.
    sys.unraisablehook = lambda unraisable: None
    raise KeyboardInterrupt


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = _Parser(prog="patchbench", description="Read, apply, check, build and boot Linux kernel patch series.")
    parser.add_argument("--version", action="version", version=f"patchbench {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    # Import only the command being run: the stages' imports (git, tree-sitter, rich) cost more than
    # a small series takes to apply. Help and usage errors list every command.
    named = [word for word in argv if word in COMMANDS][:1]
    for name in named or COMMANDS:
        importlib.import_module(f"patchbench.commands.{name.replace('-', '_')}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _stop_as_interrupt)
    signal.signal(signal.SIGINT, _stop_as_interrupt)
    try:
        argv = sys.argv[1:] if argv is None else argv
        args = build_parser(argv).parse_args(argv)
        return args.func(args)
    except Failed as exc:
        print(f"patchbench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("patchbench: error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def program() -> None:
    """The `patchbench` program: main(), then exit with its code. A stop signal that arrives once the
    work is done is ignored: Python's shutdown puts back the default handlers, and the process would
    otherwise die of the signal with its answer already given."""
    code = 130
    try:
        code = main()
    except KeyboardInterrupt:   # main() had returned when the signal came: its answer stands
        pass
    finally:
        # No stop signal from here on, and none already caught may run its handler now:
        # signal.signal() runs pending handlers before it replaces them.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                signal.signal(signum, signal.SIG_IGN)
            except KeyboardInterrupt:
                pass
    raise SystemExit(code)
