"""`patchbench build SOURCE|A..B --tree DIR`: compile what each patch touched (W=1, before and after)
and report the warnings each patch added, by identity; `--full` also builds the head's kernel image."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from patchbench.commands.apply import add_apply_arguments, apply_from_args
from patchbench.commands.runner_options import add_runner_arguments
from patchbench.dispatch import commits, progress, workspace
from patchbench.dispatch.jobs import JobResult, Target
from patchbench.dispatch.kbuild import DEFAULT_MAKE_VARS
from patchbench.dispatch.kconfig import KernelConfig
from patchbench.dispatch.kselftest import Selection
from patchbench.dispatch.runner import LocalRunner, check_jobs, default_context, plan, series_check
from patchbench.dispatch.store import ResultStore, check_results_db
from patchbench.errors import BadInput
from patchbench.report import jobs as jobs_report
from patchbench.tree import ApplyResult

if TYPE_CHECKING:
    from patchbench.checks.run.series import SeriesCheck


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("build", help="build each patch's touched objects and report new warnings")
    add_apply_arguments(parser, ranges=True)
    parser.add_argument("--full", action="store_true", help="also build the whole kernel at the series head")
    add_dispatch_arguments(parser)
    parser.set_defaults(func=run)


def add_dispatch_arguments(parser: argparse.ArgumentParser, formats: tuple[str, ...] = ("text", "json")) -> None:
    parser.add_argument("--config", metavar="FRAGMENT", action="append", default=[], type=Path,
                        help="a Kconfig fragment merged over the netdev test config (repeatable)")
    parser.add_argument("--sparse", action="store_true",
                        help="also run sparse on the touched objects (C=1; a build directory of its own)")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="run make without bubblewrap (only for a series you trust)")
    parser.add_argument("--build-timeout", type=float, default=3600.0, metavar="S", help="per build job")
    parser.add_argument("--boot-timeout", type=float, default=60.0, metavar="S",
                        help="per boot job under KVM; tripled under TCG (default: 60)")
    parser.add_argument("--cache", type=Path, default=None, metavar="DIR",
                        help="build directories, kernels and results (default: ~/.cache/patchbench)")
    parser.add_argument("--results", type=Path, default=None, metavar="FILE",
                        help="SQLite file the job results are added to (default: CACHE/results.sqlite)")
    parser.add_argument("--logs", type=Path, default=None, metavar="DIR", help="where job logs go")
    parser.add_argument("--format", choices=formats, default="text", help="output format (default: text)")
    add_runner_arguments(parser)


def make_runner(args, store: ResultStore | None):
    if args.runner == "local":
        return LocalRunner(store)
    if not args.broker:
        raise BadInput("--runner celery needs --broker redis://HOST:PORT/DB (or PATCHBENCH_BROKER)")
    from patchbench.dispatch.farm import FarmRunner   # Celery is imported only when a farm is used

    return FarmRunner(args.broker, store, tree_url=getattr(args, "tree_url", None))


def check_on_runner(applied: ApplyResult, args) -> SeriesCheck:
    """The static checks of each applied patch as jobs of `args`' runner (the farm's way to check),
    stored with the build and boot jobs (`patchbench results` names the worker of each)."""
    store = _result_store(args)
    try:
        ctx = default_context(None, workspace.cache_root(), progress.PlainProgress(sys.stderr))
        return series_check(applied, make_runner(args, store).run(check_jobs(applied), ctx))
    finally:
        store.close()


def _result_store(args) -> ResultStore:
    """--results, default results.sqlite in --cache (the build cache)."""
    cache = getattr(args, "cache", None) or workspace.cache_root()
    return ResultStore(getattr(args, "results", None) or cache / "results.sqlite")


def add_boot_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-coverage", action="store_true",
                        help="do not count calls of the functions the series changed (the function profiler)")
    parser.add_argument("--no-exercise", action="store_true",
                        help="run only the smoke test, not the exercises chosen for what the series touches")
    parser.add_argument("--boot-each", action="store_true",
                        help="build and boot every patch of the series, not only the head (slower); the report "
                             "names the first patch whose boot showed a splat or a stall")
    parser.add_argument("--kselftest", metavar="TARGET[:TEST]", action="append", default=[], type=Selection.parse,
                        help="after the smoke test, run this kselftest target (a directory under "
                             "tools/testing/selftests, e.g. net/af_unix) or one TEST of it, built from the "
                             "same commit; raise --boot-timeout for long ones (repeatable)")


def check_dispatch_arguments(args) -> None:
    """Refuse a missing config fragment or a results file that is not ours before any work is done
    (the series is applied first, and nothing may be created for a command that cannot run)."""
    KernelConfig.netdev(args.config)
    results = args.results or (args.cache or workspace.cache_root()) / "results.sqlite"
    if results.exists():
        check_results_db(results)


def applied_from(args) -> ApplyResult:
    """The commits to work on: a range of the tree, or the series applied in isolation."""
    repo = Path(args.tree)
    if not (repo / ".git").exists():
        raise BadInput(f"not a git repository: {repo}")
    if commits.is_range(repo, args.source):
        return commits.applied_range(repo, args.source)
    return apply_from_args(args)[1]


def dispatch(applied: ApplyResult, args, *, objects: bool, kernel: bool, boot: bool, boot_each: bool = False,
             count_calls: bool = True, exercise: bool = True, kselftests: tuple[Selection, ...] = ()) -> list[JobResult]:
    cache = args.cache or workspace.cache_root()
    make_vars = {**DEFAULT_MAKE_VARS, **({"C": "1"} if args.sparse else {})}
    target = Target(applied.repo.resolve(), applied.base, KernelConfig.netdev(args.config),
                    tuple(sorted(make_vars.items())), sandboxed=not args.no_sandbox)
    jobs = plan(applied, target, objects=objects, kernel=kernel, boot=boot, boot_each=boot_each,
                count_calls=count_calls, exercise=exercise,
                build_timeout=args.build_timeout, boot_timeout=args.boot_timeout, kselftests=kselftests)
    store = _result_store(args)
    try:
        ctx = default_context(args.logs, cache, progress.for_stream(sys.stderr))
        return make_runner(args, store).run(jobs, ctx)
    finally:
        store.close()


def print_results(applied: ApplyResult, results: list[JobResult], fmt: str) -> int:
    if fmt == "json":
        print(json.dumps({"base": applied.base, "head": applied.head, "jobs": jobs_report.to_json(results),
                          "first_failing_boot": jobs_report.first_failing_boot(results)}, indent=2))
    else:
        print(jobs_report.to_text(results))
    return jobs_report.exit_code(results)


def run(args) -> int:
    check_dispatch_arguments(args)
    applied = applied_from(args)
    if applied.failed is not None:
        print(f"patchbench: patch {applied.failed.index} does not apply: {applied.failed.reason}", file=sys.stderr)
    results = dispatch(applied, args, objects=True, kernel=args.full, boot=False)
    code = print_results(applied, results, args.format)
    return 1 if applied.failed is not None else code
