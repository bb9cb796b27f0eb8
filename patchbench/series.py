"""Stage 2: group decoded mails into patch series, pick a version, collect trailers and base info.

Contract (other stages rely on these fields; extend freely):
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from patchbench.errors import BadInput
from patchbench.mail import read_mails
from patchbench.mail.content import base_info, message_trailers, reply_trailers
from patchbench.mail.decode import parse_date, parse_person, format_person
from patchbench.mail.files import FileChange, files_touched, is_truncated
from patchbench.mail.subject import parse_subject
from patchbench.threads import Item, Posting, build_items, group_postings

__all__ = ["FileChange", "Patch", "Cover", "Series", "load_series", "select_series", "find_series"]


@dataclass
class Patch:
    index: int                     # n of n/N (1 for an unnumbered single patch)
    subject: str                   # subject without the [PATCH ...] prefix
    message_id: str
    author: str                    # "Name <mail>"
    date: datetime | None
    body: str                      # commit message (no trailers cut off; everything above ---)
    diff: str                      # the patch text from the first diff header to the end
    trailers: list[str] = field(default_factory=list)   # own + collected from replies, de-duplicated
    files: list[FileChange] = field(default_factory=list)
    version: int = 1               # the version this patch was posted as (older in a partial reroll)


@dataclass
class Cover:
    subject: str
    message_id: str
    body: str
    trailers: list[str] = field(default_factory=list)   # given in replies to the cover letter


@dataclass
class Series:
    version: int
    total: int
    tree: str | None               # "net", "net-next" or None, from the subject prefix
    subject_prefix: str            # e.g. "PATCH net-next"
    cover: Cover | None
    patches: list[Patch]
    missing: list[int] = field(default_factory=list)
    base_commit: str | None = None
    prerequisite_patch_ids: list[str] = field(default_factory=list)
    change_id: str | None = None
    other_versions: list[int] = field(default_factory=list)
    title: str = ""                # cover subject, else the first patch's subject


def load_series(source: str, version: int | None = None) -> Series:
    """The series in `source` (mbox, maildir, message, directory, .gz or "-"): newest version unless asked.

    When the source holds several unrelated series, the first one stored is taken.
    Raises BadInput when the source is unreadable, truncated, or holds no patch.
    """
    topics, replies = _group(source)
    return select_series([[_build(p, topics[0], replies) for p in topics[0]]], version, source)


def find_series(source: str) -> list[list[Series]]:
    """Every series in `source`, grouped by topic (the versions of one piece of work), oldest first."""
    topics, replies = _group(source)
    return [[_build(posting, topic, replies) for posting in topic] for topic in topics]


def _group(source: str) -> tuple[list[list[Posting]], dict[int, list[Item]]]:
    items = build_items(list(read_mails(source)))
    postings = [p for p in group_postings(items) if p.patches]
    if not postings:
        raise BadInput(f"{_name(source)}: no patch found in {len(items)} message(s)")
    return _topics(postings), _replies_by_target(items)


def select_series(topics: list[list[Series]], version: int | None, source: str = "") -> Series:
    topic = topics[0]
    versions = sorted({series.version for series in topic})
    wanted = version if version is not None else versions[-1]
    chosen = [series for series in topic if series.version == wanted]
    if not chosen:
        listed = ", ".join(f"v{v}" for v in versions)
        raise BadInput(f"{_name(source)}: no version {wanted} of the series (found {listed})")
    series = chosen[-1]
    series.other_versions = [v for v in versions if v != wanted]
    return series


def _name(source: str) -> str:
    return "standard input" if source == "-" else source


def _topics(postings: list[Posting]) -> list[list[Posting]]:
    """Join postings that thread to each other or share a title and sender; order by first appearance."""
    parent = {id(p): id(p) for p in postings}

    def root(key: int) -> int:
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    by_title: dict[tuple[str, str], int] = {}
    for posting in postings:
        for other in posting.related:
            if other in parent:
                parent[root(id(posting))] = root(other)
        for item in posting.items():
            key = (posting.sender.lower(), _title(item).lower())
            if key in by_title:
                parent[root(id(posting))] = root(by_title[key])
            else:
                by_title[key] = id(posting)
    groups: dict[int, list[Posting]] = {}
    for posting in sorted(postings, key=lambda p: p.first_position):
        groups.setdefault(root(id(posting)), []).append(posting)
    return list(groups.values())


def _title(item: Item) -> str:
    return parse_subject(item.text.inbody.subject).title if item.text.inbody.subject else item.subject.title


def _replies_by_target(items: list[Item]) -> dict[int, list[Item]]:
    """Replies (mails outside any posting) keyed by the patch or cover they answer, thread order kept."""
    replies: dict[int, list[Item]] = {}
    for item in items:
        if item.group is not None:
            continue
        target = next((a for a in item.ancestors() if a.group is not None), None)
        if target is not None:
            replies.setdefault(id(target), []).append(item)
    return replies


def _build(posting: Posting, topic: list[Posting], replies: dict[int, list[Item]]) -> Series:
    cover_item = posting.cover
    patch_items = dict(posting.patches)
    if posting.numbered and any(i not in patch_items for i in range(1, posting.total + 1)):
        # b4's partial reroll: parts not resent in this version come from the newest older posting
        for older in sorted((p for p in topic if p.version < posting.version and p.total == posting.total),
                            key=lambda p: p.version, reverse=True):
            for index, item in older.patches.items():
                patch_items.setdefault(index, item)
            cover_item = cover_item or older.cover
    cover_trailers = _collected(cover_item, replies) if cover_item else []
    patches = [_patch(index, item, cover_trailers, replies) for index, item in sorted(patch_items.items())]
    head = cover_item or patch_items[min(patch_items)]
    texts = ([cover_item.mail.text] if cover_item else []) + [item.mail.text for item in patch_items.values()]
    base = base_info(texts)
    total = max(posting.total, max(patch_items) if posting.numbered else 1)
    return Series(
        version=posting.version,
        total=posting.total,
        tree=head.subject.tree,
        subject_prefix=head.subject.prefix or "PATCH",
        cover=Cover(_title(cover_item), cover_item.mail.message_id, cover_item.text.message, cover_trailers)
        if cover_item else None,
        patches=patches,
        missing=[i for i in range(1, total + 1) if i not in patch_items and i <= posting.total],
        base_commit=base.base_commit,
        prerequisite_patch_ids=base.prerequisite_patch_ids,
        change_id=base.change_id,
        title=_title(head),
    )


def _collected(item: Item, replies: dict[int, list[Item]]) -> list[str]:
    return [t for reply in replies.get(id(item), []) for t in reply_trailers(reply.mail.text, reply.mail.from_email)]


def _patch(index: int, item: Item, cover_trailers: list[str], replies: dict[int, list[Item]]) -> Patch:
    mail, inbody = item.mail, item.text.inbody
    author = format_person(*parse_person(inbody.author)) if inbody.author else mail.sender
    date = (parse_date(inbody.date) if inbody.date else None) or mail.date
    if is_truncated(item.text.diff):
        where = f"message {mail.position + 1}" + (f" <{mail.message_id}>" if mail.message_id else "")
        raise BadInput(f"patch {index} ({where}) is truncated: its last hunk ends early")
    own = message_trailers(item.text.message)
    return Patch(
        index=index,
        subject=_title(item),
        message_id=mail.message_id,
        author=author,
        date=date,
        body=item.text.message,
        diff=item.text.diff,
        trailers=_unique(own + _collected(item, replies) + cover_trailers),
        files=files_touched(item.text.diff),
        version=item.group.version if item.group else item.subject.version,
    )


def _unique(trailers: list[str]) -> list[str]:
    seen: set[str] = set()
    result = []
    for trailer in trailers:
        key = " ".join(trailer.lower().split())
        if key not in seen:
            seen.add(key)
            result.append(trailer)
    return result
