"""`patchbench results`: the stored build and boot job results, newest first."""

from __future__ import annotations

import json
import time
from pathlib import Path

from patchbench.dispatch import workspace
from patchbench.dispatch.jobs import STATUSES
from patchbench.dispatch.store import ResultStore


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("results", help="show stored build and boot job results")
    parser.add_argument("--db", type=Path, default=None, metavar="FILE",
                        help="results database (default: ~/.cache/patchbench/results.sqlite)")
    parser.add_argument("--commit", metavar="SHA", help="only jobs on commits starting with SHA")
    parser.add_argument("--status", choices=STATUSES, help="only jobs with this status")
    parser.add_argument("--fingerprint", metavar="FP", help="every job that failed with this fingerprint")
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(func=run)


def run(args) -> int:
    path = args.db or workspace.cache_root() / "results.sqlite"
    if args.db is None and not path.exists():
        rows = []   # no job has run on this machine yet; nothing to show, and nothing to create
    else:
        rows = _stored(args, ResultStore(path, read_only=True))
    if args.format == "json":
        print(json.dumps([{"id": r.id, "run": r.run, "finished": r.finished, "repo": r.repo, **r.data}
                          for r in rows], indent=2))
        return 0
    for r in rows:
        d = r.data
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.finished))
        what = "kernel" if d.get("scope") == "kernel" else d["kind"]
        patch = f"patch {d['patch']}" if d.get("patch") is not None else "head"
        extra = d.get("fingerprint") or d.get("reason") or ""
        where = f" [{d['worker']}]" if d.get("worker") else ""
        print(f"{when} {r.run} {what:6} {patch:8} {d['commit'][:12]} {d['status']:5} {d['seconds']:7.1f} s"
              f"{where}  {extra}")
    return 0


def _stored(args, store: ResultStore) -> list:
    try:
        if args.fingerprint:
            return store.query("fingerprint = ?", (args.fingerprint,), args.limit)
        return store.recent(args.limit, args.commit, args.status)
    finally:
        store.close()
