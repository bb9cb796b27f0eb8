"""`patchbench lint PATH...`: run the checker's rules over whole C files or directories.

Files are analysed in worker processes (one per core by default); each returns only its findings,
so a worker's memory is one file's tree at a time. Findings are cached by git blob id
(patchbench.checks.facts), so a second lint of an unchanged tree reads them back.
"""

from __future__ import annotations

import os
from pathlib import Path

from patchbench.checks import callindex, facts
from patchbench.checks.finding import Finding
from patchbench.errors import BadInput
from patchbench.report.findings import FORMATS, render

C_SUFFIXES = (".c", ".h")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("lint", help="check whole C files or directories (no series)")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="C files, or directories to search for *.c and *.h")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: one per core)")
    parser.add_argument("--no-cache", action="store_true", help="analyse every file even if its facts are cached")
    parser.set_defaults(func=run)


def c_files(paths: list[str]) -> list[str]:
    """The files to lint, in a stable order: given files as they are, directories searched."""
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
    return found


def _lint_file(task: tuple[str, bool]) -> list[Finding]:
    path, use_cache = task
    try:
        source = Path(path).read_bytes()
    except OSError as exc:
        raise BadInput(f"{path}: {exc.strerror}") from None
    return facts.findings_for(path, source, use_cache)


def lint(paths: list[str], jobs: int = 1, use_cache: bool = True) -> list[Finding]:
    """Findings of the files under paths; inside a kernel tree, with its call index (callers
    of each function across the whole tree, built once per tree content and cached)."""
    files = c_files(paths)
    root = callindex.tree_root(files)
    index = callindex.from_files(root, jobs) if root is not None else None
    with callindex.active(index, root):
        found = facts.parallel(_lint_file, [(path, use_cache) for path in files], jobs)
    return sorted((f for result in found for f in result), key=lambda f: (f.file, f.line, f.rule))


def run(args) -> int:
    findings = lint(args.paths, max(1, args.jobs), not args.no_cache)
    output = render(findings, args.format)
    if output:
        print(output)
    return 1 if findings else 0
