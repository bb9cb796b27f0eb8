"""The real-bug benchmark: recall on genuine upstream fixes re-introduced on Debian's 6.1 and newest trees.

For every case of fixtures/realbugs/cases.toml (see docs/realbugs.md) a two-patch series is made
from the Debian tree (patch 1: the fix undone, patch 2: the fix again) and checked with
`patchbench check --format json` in its own process, with a fresh facts cache. Prints recall per rule
family and per kernel (in scope: upstream fixes; the mission's and the seeds' own examples apart),
every finding on a fix, and each miss with its recorded reason or, for an unmarked miss, what
patch 1 did get. Run from the project root: `nice python bench/realbugs.py [--kernel 6.1] [CASE...]`.

`--validation` runs the frozen validation set of fixtures/realbugs/validation/*.toml instead: real
fixes never used to tune the checker (report its recall; fix a miss only by a general change).

`--lint` also lints each case's file whole, with its bug and without (no diff: `patchbench lint`'s
judgement of the buggy code as it would sit in the tree) and prints that recall apart, with the
cases whose fixed file is reported too.

`--introduced` runs the "as introduced" twins of fixtures/realbugs/introduced.toml instead: for a
validation case whose bug's introducing commit still replays faithfully on the tree, that commit
as patch 1 on a base without it and the fix as patch 2 (tests/support/introduced.py); it prints
their recall beside the same cases' recall as fixes reversed.

`--mutations` runs the held-out set of fixtures/realbugs/mutations.toml instead: bugs of our own
planted in real 6.1 drivers (found / planted, per family), then whole-file lint of its pristine
files (every finding printed: each one is a false alarm or a bug in the Debian tree).
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support import introduced, realbugs  # noqa: E402
from tests.support.kernel import KERNELS, kernel_repo, tree  # noqa: E402


def _rate(outcomes: list[realbugs.Outcome]) -> str:
    caught, total = realbugs.recall(outcomes)
    return f"{caught}/{total} = {caught / total:.0%}" if total else "-"


def _why(outcome: realbugs.Outcome) -> str:
    if outcome.not_applicable:
        return f"not applicable: {outcome.not_applicable}"
    if outcome.error:
        return f"error: {outcome.error}"
    got = ", ".join(sorted({f"{f['rule']} in {f['function']}" for f in outcome.patch1})) or "no finding"
    parts = []
    if not outcome.caught:
        parts.append(outcome.case.xfail or f"UNMARKED miss (patch 1: {got})")
    if outcome.on_fix:
        parts.append("finding on the fix")
    return "; ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", choices=sorted(KERNELS), help="only the cases on this tree")
    parser.add_argument("--json", type=Path, help="also write every outcome to this file")
    parser.add_argument("--mutations", action="store_true",
                        help="the held-out mutations of real drivers and their pristine files")
    parser.add_argument("--validation", action="store_true",
                        help="the frozen validation set of fixtures/realbugs/validation (never tuned on)")
    parser.add_argument("--introduced", action="store_true",
                        help="the validation cases' bugs as introduced (fixtures/realbugs/introduced.toml)")
    parser.add_argument("--lint", action="store_true",
                        help="also whole-file lint of each case's buggy file and fixed file (no diff)")
    parser.add_argument("cases", nargs="*", help="case ids (default: all)")
    args = parser.parse_args()
    chosen = (realbugs.load_validation() if args.validation else
              realbugs.load_cases(realbugs.MUTATIONS if args.mutations else realbugs.CASES))
    cases = [c for c in chosen
             if (not args.kernel or c.kernel == args.kernel) and (not args.cases or c.id in args.cases)]
    trees = {name: kernel_repo(name) for name in sorted({c.kernel for c in cases})}
    for name in trees:
        print(f"kernel {tree(name).describe()}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="realbugs-") as tmp:
        bench = realbugs.Bench(Path(tmp), trees)
        if args.introduced:
            twins = [t for t in introduced.load_introduced()
                     if (not args.kernel or t.case.kernel == args.kernel) and (not args.cases or t.id in args.cases)]
            return _introduced(bench, twins)
        outcomes = []
        for case in cases:
            outcome = bench.outcome(case)
            outcomes.append(outcome)
            mark = ("n/a" if outcome.not_applicable else
                    "caught" if outcome.caught and outcome.clean_fix else "MISSED")
            print(f"  {mark:6}  {case.kernel}  {case.family:8}  {case.id}", flush=True)
        linted = {o.case.id: realbugs.lint_of_case(*bench.clone(o.case.kernel), o.case)
                  for o in outcomes if args.lint and not o.not_applicable}
        seconds = time.monotonic() - started
        if args.mutations:
            return _mutations(outcomes, seconds, Path(tmp) / "lint-cache")

    upstream = [o for o in outcomes if o.case.origin == "upstream"]
    absent = [o for o in outcomes if o.not_applicable]
    print(f"\n{len(outcomes)} cases ({len(upstream)} upstream fixes) in {seconds:.0f} s; "
          f"{len(absent)} not applicable to these trees (counted in no rate below)\n")
    print("in scope (upstream fixes): recall per family and kernel")
    by = collections.defaultdict(list)
    for o in upstream:
        by[(o.case.family, o.case.kernel)].append(o)
        by[(o.case.family, "all")].append(o)
        by[("all", o.case.kernel)].append(o)
    for family in (*realbugs.ORDER, "all"):
        row = "  ".join(f"{kernel}: {_rate(by[(family, kernel)]):>12}" for kernel in sorted(KERNELS))
        total = _rate(by[(family, "all")]) if family != "all" else _rate(upstream)
        print(f"  {family:9} {row}  both: {total}")
    for origin, what in (("adapted", "fixes adapted to changed code"), ("mission", "examples"), ("seed", "examples")):
        own = [o for o in outcomes if o.case.origin == origin]
        if own:
            print(f"  {origin} {what}: {_rate(own)}")
    if linted:
        _lint_recall(upstream, linted)
    on_fix = [o for o in outcomes if o.on_fix]
    print(f"\nfindings on the fixes: {sum(len(o.on_fix) for o in on_fix)} in {len(on_fix)} case(s)")
    for o in on_fix:
        for f in o.on_fix:
            print(f"  {o.case.id}: {f['rule']} {f['file']}:{f['line']} {f['function']}: {f['message']}")
    if args.json:
        args.json.write_text(json.dumps([{"id": o.case.id, "kernel": o.case.kernel, "family": o.case.family,
                                          "origin": o.case.origin, "caught": o.caught, "patch1": o.patch1,
                                          "on_fix": o.on_fix, "error": o.error, "not_applicable": o.not_applicable}
                                         for o in outcomes], indent=1))
    misses = [o for o in outcomes if not (o.caught and o.clean_fix)]   # not applicable ones listed too
    print(f"\nmisses: {len(misses)}")
    for o in misses:
        print(f"  {o.case.kernel} {o.case.id} [{o.case.rule}]: {_why(o)}")
    return 0


def _lint_recall(upstream: list[realbugs.Outcome], linted: dict[str, tuple[bool, bool]]) -> None:
    """Recall of whole-file lint of the buggy code per family, and the fixed files it reports."""
    print("\nwhole-file lint of the buggy file (no diff), upstream fixes: reported / applicable")
    by = collections.defaultdict(list)
    for o in upstream:
        if o.case.id in linted:
            by[o.case.family].append(o.case.id)
            by["all"].append(o.case.id)
    for family in (*realbugs.ORDER, "all"):
        ids = by[family]
        if ids:
            caught = sum(linted[i][0] for i in ids)
            print(f"  {family:9} {caught}/{len(ids)} = {caught / len(ids):.0%}")
    still = sorted(i for ids in [by["all"]] for i in ids if linted[i][1])
    print(f"  the fixed file reported as well (the rule cannot tell bug from fix): {len(still)}"
          + (f" ({', '.join(still)})" if still else ""))


def _introduced(bench: realbugs.Bench, twins: list[introduced.Introduced]) -> int:
    """Each twin as introduced and as its fix reversed; recall of both over the twins that replay."""
    rows = []
    for twin in twins:
        repo, base = bench.clone(twin.case.kernel)
        reason = introduced.applicability(repo, base, twin, bench.linux(twin.case.kernel))
        if reason:
            outcome = realbugs.Outcome(twin.case, False, not_applicable=reason)
        else:
            try:
                outcome = introduced.run(repo, base, twin, bench.workdir / "introduced", bench.workdir / "cache")
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                outcome = realbugs.Outcome(twin.case, False, error=str(exc))
        reversed_fix = bench.outcome(twin.case)
        rows.append((outcome, reversed_fix))
        mark = "n/a" if outcome.not_applicable else "caught" if outcome.caught and outcome.clean_fix else "MISSED"
        print(f"  {mark:6}  {twin.case.kernel}  {twin.case.family:8}  {twin.id} (as introduced by {twin.commit[:12]})",
              flush=True)
    counted = [(o, r) for o, r in rows if not o.not_applicable]
    validation = {c.id for c in realbugs.load_validation()}
    print(f"\n{len(rows)} twins, {len(counted)} replay faithfully; recall per family, as introduced "
          "and (the same cases) as the fix reversed:")
    for name, members in (("validation", lambda o: o.case.id in validation),
                          ("development", lambda o: o.case.id not in validation)):
        of_set = [(o, r) for o, r in counted if members(o)]
        for family in (*realbugs.ORDER, "all") if of_set else ():
            chosen = [(o, r) for o, r in of_set if family in ("all", o.case.family)]
            if chosen:
                print(f"  {name:11} {family:9} as introduced {_rate([o for o, _ in chosen]):>10}   "
                      f"fix reversed {_rate([r for _, r in chosen]):>10}")
    for outcome, _ in rows:
        if not (outcome.caught and outcome.clean_fix):
            print(f"  {outcome.case.id}: {_why(outcome)}")
        for f in outcome.on_fix:
            print(f"    on the fix: {f['rule']} {f['file']}:{f['line']} {f['function']}: {f['message']}")
    return 0


def _mutations(outcomes: list[realbugs.Outcome], seconds: float, cache: Path) -> int:
    print(f"\n{len(outcomes)} planted bugs in {seconds:.0f} s: found {_rate(outcomes)}")
    by = collections.defaultdict(list)
    for o in outcomes:
        by[o.case.family].append(o)
    for family in realbugs.ORDER:
        print(f"  {family:9} {_rate(by[family])}")
    for o in outcomes:
        if not (o.caught and o.clean_fix):
            print(f"  missed {o.case.id} [{o.case.rule}]: {_why(o)}")
    for kernel, listed in realbugs.load_correct().items():
        tree_path = kernel_repo(kernel)
        files = [f for f in listed if (tree_path / f).is_file()]
        if len(files) < len(listed):
            print(f"pristine {kernel} files not in this tree: {sorted(set(listed) - set(files))}")
        found = realbugs.lint_files(tree_path, files, cache)
        print(f"\npristine {kernel} files: {len(found)} finding(s) in {len(files)} files")
        for f in found:
            print(f"  {f['rule']} {f['file']}:{f['line']} {f['function']}: {f['message']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
