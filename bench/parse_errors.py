"""Share of kernel functions whose tree has ERROR nodes: plain tree-sitter-c vs our pre-pass.

Over every .c file of drivers/net and net/ of each kernel (Debian's 6.1 and newest trees), both ways:
the top-level function definitions found, how many contain an ERROR (or MISSING) node, and the
files with any error.
A raw parse also "finds" nested functions where iterator macros open a block, and loses the
functions an `__aligned(n)` initialiser swallows; both counts are printed.
Run from the project root: `python bench/parse_errors.py [-j N] [--limit N] [--kernel 6.1|newest]`.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path

import tree_sitter

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchbench.checks.engine import parse as cparse   # noqa: E402
from patchbench.checks.engine.model import FileModel   # noqa: E402
from tests.support.kernel import KERNELS, kernel_repo  # noqa: E402

AREAS = ("drivers/net", "net")


def _top_functions(root: tree_sitter.Node) -> list[tree_sitter.Node]:
    found = []
    for node in root.children:
        if node.type == "function_definition":
            found.append(node)
        elif node.type.startswith("preproc_"):
            found.extend(c for c in node.named_children if c.type == "function_definition")
    return found


def measure(path: Path) -> tuple[int, int, bool, int, int, bool]:
    source = path.read_bytes()
    raw = tree_sitter.Parser(cparse.LANGUAGE).parse(source).root_node
    raw_functions = _top_functions(raw)
    model = FileModel.build(str(path), source)
    ours = list(model.functions.values())
    return (len(raw_functions), sum(f.has_error for f in raw_functions), raw.has_error,
            len(ours), sum(f.node.has_error for f in ours), model.tree.root_node.has_error)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--limit", type=int, help="only the first N files (quick look)")
    parser.add_argument("--kernel", action="append", choices=sorted(KERNELS),
                        help="kernel version (repeatable; default: every one)")
    args = parser.parse_args()
    for version in args.kernel or sorted(KERNELS):
        report(version, args.jobs, args.limit)


def report(version: str, jobs: int, limit: int | None) -> None:
    tree = kernel_repo(version)
    files = sorted(p for area in AREAS for p in (tree / area).rglob("*.c"))[:limit]
    started = time.monotonic()
    with multiprocessing.Pool(jobs) as pool:
        rows = pool.map(measure, files, chunksize=16)
    seconds = time.monotonic() - started
    totals = [sum(column) for column in zip(*rows)]
    raw_fn, raw_err, raw_files, our_fn, our_err, our_files = totals
    print(f"linux {version}: {len(files)} .c files under {' and '.join(AREAS)} ({seconds:.1f} s on {jobs} workers)")
    print(f"  plain tree-sitter-c: {raw_err}/{raw_fn} functions with errors ({100 * raw_err / max(raw_fn, 1):.1f}%), "
          f"{raw_files} files with errors ({100 * raw_files / len(files):.1f}%)")
    print(f"  with the pre-pass:   {our_err}/{our_fn} functions with errors ({100 * our_err / max(our_fn, 1):.1f}%), "
          f"{our_files} files with errors ({100 * our_files / len(files):.1f}%)")


if __name__ == "__main__":
    main()
