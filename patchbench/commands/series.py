"""`patchbench series SOURCE`: show the series found in a mailbox, maildir, message or directory."""

from __future__ import annotations

import json

from patchbench.commands.apply import add_input_limit_arguments, input_limits
from patchbench.series import Series, load_series, load_versions


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("series", help="show the series found in SOURCE")
    parser.add_argument("source", metavar="SOURCE",
                        help='mbox, maildir, message, directory of *.patch, .gz, "-", or a Message-Id / lore URL')
    parser.add_argument("--json", action="store_true", help="print the series as JSON")
    parser.add_argument("--all-versions", action="store_true", help="show every version found, not just one")
    parser.add_argument("--version", type=int, metavar="N", help="pick version N instead of the newest")
    add_input_limit_arguments(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    limits = input_limits(args)
    if args.all_versions:
        shown = load_versions(args.source, limits)
        if args.version is not None:
            shown = [s for s in shown if s.version == args.version] or [load_series(args.source, args.version, limits)]
    else:
        shown = [load_series(args.source, args.version, limits)]
    if args.json:
        documents = [series_json(s) for s in shown]
        print(json.dumps(documents if args.all_versions else documents[0], indent=2))
    else:
        print("\n\n".join(summary(s) for s in shown))
    return 0


def series_json(series: Series) -> dict:
    return {
        "version": series.version,
        "total": series.total,
        "tree": series.tree,
        "subject_prefix": series.subject_prefix,
        "title": series.title,
        "cover": {"subject": series.cover.subject, "message_id": series.cover.message_id,
                  "trailers": series.cover.trailers} if series.cover else None,
        "patches": [
            {
                "index": p.index,
                "subject": p.subject,
                "message_id": p.message_id,
                "author": p.author,
                "date": p.date.isoformat() if p.date else None,
                "version": p.version,
                "patch_id": p.patch_id,
                "trailers": p.trailers,
                "carried_trailers": [{"trailer": c.trailer, "from_version": c.from_version,
                                      "from_message_id": c.from_message_id, "reason": c.reason}
                                     for c in p.carried_trailers],
                "older_copies": p.older_copies,
                "files": [f.path for f in p.files],
                "changes": [{"path": f.path, "old_path": f.old_path, "status": f.status,
                             "added": f.added, "removed": f.removed, "binary": f.binary} for f in p.files],
            }
            for p in series.patches
        ],
        "missing": series.missing,
        "base_commit": series.base_commit,
        "prerequisite_patch_ids": series.prerequisite_patch_ids,
        "change_id": series.change_id,
        "prerequisite_change_ids": series.prerequisite_change_ids,
        "prerequisite_message_ids": series.prerequisite_message_ids,
        "other_versions": series.other_versions,
        "other_series": series.other_series,
    }


def summary(series: Series) -> str:
    lines = [f"[{series.subject_prefix} v{series.version}] {series.title}",
             f"  tree: {series.tree or '(none given)'}   patches: {len(series.patches)} of {series.total}"]
    if series.missing:
        lines.append(f"  missing: {', '.join(str(i) for i in series.missing)}")
    if series.other_versions:
        lines.append(f"  other versions: {', '.join(f'v{v}' for v in series.other_versions)}")
    if series.cover:
        lines.append(f"  cover: {series.cover.subject}")
    for patch in series.patches:
        carried = f"  [kept from v{patch.version}: not resent]" if patch.version != series.version else ""
        lines.append(f"  {patch.index:>2}/{series.total} {patch.subject}  ({patch.author}){carried}")
        if patch.older_copies:
            lines.append(f"        note: sent {len(patch.older_copies) + 1} times in the thread; the newest copy is "
                         f"used, the reviews of every copy kept")
        carried = {c.trailer: c for c in patch.carried_trailers}
        for trailer in patch.trailers:
            if not trailer.lower().startswith("signed-off-by"):
                lines.append(f"        {trailer}")
            if trailer in carried:
                lines.append(f"          note: {carried[trailer].note()}")
    if series.base_commit:
        lines.append(f"  base: {series.base_commit}")
    if series.change_id:
        lines.append(f"  change-id: {series.change_id}")
    for kind, values in (("patch-id", series.prerequisite_patch_ids), ("change-id", series.prerequisite_change_ids),
                         ("message-id", series.prerequisite_message_ids)):
        lines.extend(f"  prerequisite-{kind}: {value}" for value in values)
    if series.other_series:
        lines.append(f"  also in this source ({len(series.other_series)} other series, not shown):")
        lines.extend(f"    {title}" for title in series.other_series[:5])
    return "\n".join(lines)
