"""`patchbench lint PATH...`: run the checker's rules over whole C files or directories.

Files are analysed in worker processes (one per core by default); each returns only its findings,
so a worker's memory is one file's tree at a time. Findings are cached by git blob id
(patchbench.checks.facts), so a second lint of an unchanged tree reads them back.
"""

from __future__ import annotations

import os
import time
from functools import partial
from pathlib import Path

from patchbench.checks import callindex
from patchbench.checks.run import cache as findings_cache
from patchbench.checks.engine.context import TreeContext
from patchbench.checks.engine.finding import Finding
from patchbench.errors import BadInput
from patchbench.checks.engine import registry
from patchbench.report.findings import FORMATS, lint_report, render
from patchbench.report.progress import Progress

C_SUFFIXES = (".c", ".h")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("lint", help="check whole C files or directories (no series)")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="C files, or directories to search for *.c and *.h")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="output format: text, mail, terse, json, sarif (default: text)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: one per core)")
    parser.add_argument("--no-cache", action="store_true", help="analyse every file even if its facts are cached")
    parser.add_argument("--rules", metavar="IDS", default="",
                        help="comma-separated rule ids to report, or 'all' (default: every rule but those "
                             "run only when named: docs/rules.md)")
    parser.add_argument("--explain", action="store_true",
                        help="with each finding, what decided it (the ways into its function, ...)")
    parser.set_defaults(func=run)


def c_files(paths: list[str]) -> list[str]:
    """The files to lint, in a stable order: given files as they are, directories searched; a file
    named twice (or inside a directory also given) is linted once."""
    found = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found.extend(sorted(str(p) for p in path.rglob("*")
                                if p.suffix in C_SUFFIXES and p.is_file()))
        elif path.is_file():
            found.append(name)
        else:
            raise BadInput(f"{name}: no such file or directory")
    return list(dict.fromkeys(found))


_progress: Progress | None = None   # set while a lint runs; the forked workers inherit it


def _lint_file(context: TreeContext, rule_ids: frozenset[str] | None, task: tuple[str, bool]) -> list[Finding]:
    path, use_cache = task
    try:
        source = Path(path).read_bytes()
    except OSError as exc:
        raise BadInput(f"{path}: {exc.strerror}") from None
    found = findings_cache.findings_for(path, source, context, use_cache, rule_ids=rule_ids)
    if _progress is not None:
        _progress.tick()
    return found


def lint(paths: list[str], jobs: int = 1, use_cache: bool = True) -> list[Finding]:
    return lint_files(c_files(paths), jobs, use_cache)


def lint_files(files: list[str], jobs: int = 1, use_cache: bool = True,
               progress: Progress | None = None, rule_ids: frozenset[str] | None = None) -> list[Finding]:
    """Findings of `files` (of the default rules, or rule_ids); inside a kernel tree, with its call
    index (callers of each function across the whole tree, built once per tree content and cached)."""
    global _progress
    if rule_ids is None:   # lint's default rules: not those precise only on a patch's change
        rule_ids = frozenset(registry.default_rule_ids(lint=True))
    root = callindex.tree_root(files)
    if progress is not None and root is not None:
        progress.stage("indexing the callers of every function in the tree")
    # the rules' queries compile for the workers to inherit while git lists the tree
    compile_rules = registry.preload if jobs > 1 and len(files) > 1 else (lambda: None)
    index = callindex.from_files(root, jobs, compile_rules) if root is not None else None
    if progress is not None:
        progress.stage("checking files", len(files))
    _progress = progress
    try:
        # a directory at a time, so that a worker's call index answers stay warm for the
        # directory it is in (largest first over the whole tree cost a sixteenth more CPU on
        # 7.2), and within it the largest files first, so that no worker ends alone on a big one
        found = findings_cache.parallel(partial(_lint_file, TreeContext(index, root), rule_ids),
                               [(path, use_cache) for path in _by_directory(files)], jobs)
    finally:
        _progress = None
    return sorted((f for result in found for f in result), key=lambda f: (f.file, f.line, f.rule))


def _by_directory(files: list[str]) -> list[str]:
    """files grouped by directory in the order they come, each group's largest first."""
    first_seen: dict[str, int] = {}
    for n, path in enumerate(files):
        first_seen.setdefault(os.path.dirname(path), n)

    def size(path: str) -> int:
        try:
            return os.path.getsize(path)
        except OSError:
            return 0   # reading it reports the error
    return sorted(files, key=lambda path: (first_seen[os.path.dirname(path)], -size(path)))


def _selected_rules(spec: str) -> frozenset[str] | None:
    """--rules: None for the default rules, else the rule ids named ('all': every rule)."""
    known = [rule.ID for rule in registry.rules()]
    if not spec:
        return None
    named = frozenset(part.strip() for part in spec.split(",") if part.strip())
    if not named:
        raise BadInput("--rules: no rule named")
    if "all" in named:
        return frozenset(known)
    unknown = sorted(named - set(known))
    if unknown:
        raise BadInput(f"--rules: unknown rule {unknown[0]!r} (known: all, {', '.join(known)})")
    return named


def run(args) -> int:
    started = time.monotonic()
    rule_ids = _selected_rules(args.rules)
    files = c_files(args.paths)
    with Progress("lint", args.format) as progress:
        findings = lint_files(files, max(1, args.jobs), not args.no_cache, progress, rule_ids)
    output = render(lint_report(findings, files, time.monotonic() - started, sorted(rule_ids) if rule_ids else None),
                    args.format, args.explain)
    if output:
        print(output)
    return 1 if findings else 0
