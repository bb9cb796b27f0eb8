"""Group decoded mails into posted series: by threading (Message-Id, In-Reply-To, References), else
by sender, version, total and time. Each group is one posting of one version; groups that are
versions of the same work are then joined into topics."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import timedelta

from patchbench.mail import Mail
from patchbench.mail.content import InBody, reply_trailers, split_patch
from patchbench.mail.subject import Subject, parse_subject

# Unthreaded parts of one posting arrive within minutes; a day is generous and still keeps
# reposts of the same version apart when their counters collide.
_UNTHREADED_WINDOW = timedelta(hours=24)
_KEPT_REFERENCES = 4


@dataclass(slots=True)
class Item:
    """What grouping needs to know about a mail; its text is dropped to keep memory flat."""

    mail: Mail                     # identity, threading and sender only (text emptied)
    subject: Subject
    has_diff: bool
    inbody: InBody                 # `From:`/`Subject:`/`Date:` at the top of the body
    reply_trailers: tuple[str, ...]   # trailers this mail gives, were it a reply
    parent: Item | None = None
    group: Posting | None = None

    @classmethod
    def summarise(cls, mail: Mail) -> Item:
        text = split_patch(mail.text)
        subject = parse_subject(mail.subject)
        may_review = subject.is_reply or not text.diff   # a patch's own trailers are read later
        given = tuple(reply_trailers(mail.text, mail.from_email, mail.from_name)) if may_review else ()
        # keep what threading needs: the nearest references and the root are enough to find a parent
        references = mail.references[:1] + mail.references[1:][-_KEPT_REFERENCES:]
        light = replace(mail, text="", subject="", references=references, raw=b"")
        return cls(light, subject, bool(text.diff), text.inbody, given)

    @property
    def title(self) -> str:
        return parse_subject(self.inbody.subject).title if self.inbody.subject else self.subject.title

    @property
    def is_patch(self) -> bool:
        return self.has_diff and not self.subject.is_reply and self.subject.index != 0

    @property
    def is_cover(self) -> bool:
        # a 0/N is the cover letter even with a diff in it: `format-patch --interdiff` puts one there
        return not self.subject.is_reply and self.subject.index == 0

    @property
    def index(self) -> int:
        return self.subject.index if self.subject.index is not None else 1

    @property
    def total(self) -> int:
        return self.subject.total or 1

    def ancestors(self):
        seen = {id(self)}
        node = self.parent
        while node is not None and id(node) not in seen:
            seen.add(id(node))
            yield node
            node = node.parent


@dataclass
class Posting:
    """One version of a series as it was sent: an optional cover and patches by index."""

    version: int
    total: int
    sender: str
    numbered: bool
    cover: Item | None = None
    patches: dict[int, Item] = field(default_factory=dict)
    related: set[int] = field(default_factory=set)     # ids of postings this one threads to
    # older copies of a part sent again in the same thread (index, 0 for the cover), oldest first
    earlier_copies: dict[int, list[Item]] = field(default_factory=dict)

    def items(self) -> list[Item]:
        return ([self.cover] if self.cover else []) + [self.patches[i] for i in sorted(self.patches)]

    def copies(self, index: int) -> list[Item]:
        """Every copy of part `index` (0: the cover) posted in this thread, the one in use last."""
        current = self.cover if index == 0 else self.patches.get(index)
        return self.earlier_copies.get(index, []) + ([current] if current else [])

    def all_items(self) -> list[Item]:
        return self.items() + [copy for copies in self.earlier_copies.values() for copy in copies]

    @property
    def first_position(self) -> int:
        return min(item.mail.position for item in self.items())

    @property
    def last_date(self):
        dates = [item.mail.date for item in self.items() if item.mail.date is not None]
        return max(dates, key=_timestamp) if dates else None

    def accepts(self, item: Item) -> bool:
        if item.is_cover:
            return self.cover is None
        return item.index not in self.patches


def build_items(mails: Iterable[Mail]) -> list[Item]:
    """Summaries of the mails, each linked to the mail it answers; a second copy of a Message-Id
    (the same mail received through two lists, or two mailboxes joined) is left out."""
    items: list[Item] = []
    by_key: dict[str, Item] = {}
    for mail in mails:
        if mail.key not in by_key:
            by_key[mail.key] = Item.summarise(mail)
            items.append(by_key[mail.key])
    for item in items:
        candidates = ([item.mail.in_reply_to] if item.mail.in_reply_to else []) + item.mail.references[::-1]
        item.parent = next((by_key[key] for key in candidates if key in by_key and by_key[key] is not item), None)
    return items


def group_postings(items: list[Item]) -> list[Posting]:
    """Assign every patch and cover letter to a posting, parents before children."""
    postings: list[Posting] = []
    members = [item for item in items if item.is_patch or item.is_cover]
    depth = _depths(items)
    for item in sorted(members, key=lambda i: (depth[id(i)], i.mail.position)):
        posting, related = _threaded_posting(item)
        if posting is None and related is not None:
            posting = _sibling_posting(item, related, postings)
        if posting is None and related is None and item.subject.index is not None:
            posting = _unthreaded_posting(item, postings)
        if posting is None:
            posting = Posting(_version_of(item, None), item.total, item.mail.from_email, item.subject.index is not None)
            postings.append(posting)
        if related is not None and related is not posting:
            posting.related.add(id(related))
        _add(posting, item)
    postings = _merge_resent_parts(postings)
    for posting in postings:
        if posting.cover is None:
            posting.cover = _naked_cover(posting)
    return postings


def _add(posting: Posting, item: Item) -> None:
    """Put `item` in its place; a part sent again in the same thread keeps the newer copy in use."""
    item.group = posting
    index = 0 if item.is_cover else item.index
    held = posting.cover if item.is_cover else posting.patches.get(index)
    if held is not None:
        older, item = sorted((held, item), key=_sent_order)
        posting.earlier_copies[index] = sorted([*posting.earlier_copies.get(index, []), older], key=_sent_order)
    if item.is_cover:
        posting.cover = item
    else:
        posting.patches[index] = item


def _merge_resent_parts(postings: list[Posting]) -> list[Posting]:
    """Some parts sent again into the thread of their posting, same version (a resend of 2/3), are newer
    copies of those parts, not a posting of their own. A whole series sent again stays a posting: a
    RESEND, whose trailers series.py carries over by patch-id."""
    by_id = {id(posting): posting for posting in postings}
    merged: dict[int, Posting] = {}
    kept: list[Posting] = []
    for posting in postings:
        answered = [merged.get(other) or by_id[other] for other in posting.related if other in by_id]
        target = min(answered, key=lambda p: p.first_position, default=None)
        if (
            target is not None
            and posting.numbered and target.numbered
            and posting.cover is None and len(posting.patches) < posting.total
            and (posting.version, posting.total) == (target.version, target.total)
        ):
            for item in posting.all_items():
                _add(target, item)
            target.related |= posting.related - {id(target)}
            merged[id(posting)] = target
        else:
            kept.append(posting)
    for posting in kept:
        posting.related = {id(merged[other]) if other in merged else other for other in posting.related}
    return kept


def _sent_order(item: Item) -> tuple[float, int]:
    return (_timestamp(item.mail.date) if item.mail.date is not None else 0.0), item.mail.position


def _threaded_posting(item: Item) -> tuple[Posting | None, Posting | None]:
    """The posting of the nearest threaded ancestor, if this item fits there; else what it relates to."""
    for ancestor in item.ancestors():
        posting = ancestor.group
        if posting is None:
            continue
        fits = (
            posting.numbered == (item.subject.index is not None)
            and posting.total == item.total
            and posting.version == _version_of(item, posting)
            and posting.accepts(item)
        )
        if fits:
            return posting, None
        # an unnumbered diff inside a numbered thread is a side remark, not another version
        return None, (posting if posting.numbered == (item.subject.index is not None) else None)
    return None, None


def _version_of(item: Item, posting: Posting | None) -> int:
    # `[PATCH n/N]` patches under a `[PATCH v3 0/N]` cover belong to v3 (a common slip)
    if posting is not None and not item.subject.version_given:
        return posting.version
    return item.subject.version


def _sibling_posting(item: Item, related: Posting, postings: list[Posting]) -> Posting | None:
    """A newer version sent part by part in reply to the older parts (v2 1/2 answering v1 1/2, v2
    2/2 answering v1 2/2) is one posting: join the one already answering the same older posting."""
    for posting in reversed(postings):
        if (
            id(related) in posting.related
            and posting.numbered == (item.subject.index is not None)
            and posting.version == item.subject.version
            and posting.total == item.total
            and posting.accepts(item)
        ):
            return posting
    return None


def _unthreaded_posting(item: Item, postings: list[Posting]) -> Posting | None:
    """The latest numbered posting of the same version and total that lacks this index, sent by the
    same sender close in time, or stored right before this mail."""
    for posting in reversed(postings):
        if (
            posting.numbered
            and posting.version == item.subject.version
            and posting.total == item.total
            and posting.accepts(item)
            and (
                _follows_directly(posting, item)
                or posting.sender == item.mail.from_email and _close_in_time(posting, item)
            )
        ):
            return posting
    return None


def _close_in_time(posting: Posting, item: Item) -> bool:
    last = posting.last_date
    if last is None or item.mail.date is None:
        return True
    try:
        return abs(_timestamp(item.mail.date) - _timestamp(last)) <= _UNTHREADED_WINDOW.total_seconds()
    except (OverflowError, OSError, ValueError):
        return True


def _follows_directly(posting: Posting, item: Item) -> bool:
    """Adjacent in the mailbox: `format-patch --stdout` output carries commit dates, days apart."""
    return max(i.mail.position for i in posting.items()) == item.mail.position - 1


def _timestamp(moment) -> float:
    try:
        return moment.timestamp()
    except (OverflowError, OSError, ValueError):
        return 0.0


def _naked_cover(posting: Posting) -> Item | None:
    """b4's "naked" cover: a diff-less, non-reply thread root by the same sender that the patches answer."""
    parents = {id(item.parent): item.parent for item in posting.patches.values() if item.parent is not None}
    for parent in parents.values():
        if (
            parent.parent is None
            and not parent.has_diff
            and not parent.subject.is_reply
            and parent.group is None
            and parent.mail.from_email == posting.sender
        ):
            parent.group = posting
            return parent
    return None


def nearest_ancestors(items: list[Item], wanted) -> dict[int, Item | None]:
    """For each item (by id), its nearest ancestor for which `wanted(ancestor)` holds, or None.

    Answers are shared along a chain, so a reply chain thousands deep costs linear time.
    """
    found: dict[int, Item | None] = {}
    for item in items:
        chain: list[Item] = []
        on_chain: set[int] = set()
        node, answer = item, None
        while True:
            if id(node) in found:
                answer = found[id(node)]
                break
            chain.append(node)
            on_chain.add(id(node))
            parent = node.parent
            if parent is None or id(parent) in on_chain:
                break  # a root, or a loop of mails answering each other
            if wanted(parent):
                answer = parent
                break
            node = parent
        for walked in chain:
            found[id(walked)] = answer
    return found


def _depths(items: list[Item]) -> dict[int, int]:
    """Distance from each item (by id) to the root of its thread, computed once per chain."""
    depth: dict[int, int] = {}
    for item in items:
        chain: list[Item] = []
        on_chain: set[int] = set()
        node = item
        while node is not None and id(node) not in depth and id(node) not in on_chain:
            chain.append(node)
            on_chain.add(id(node))
            node = node.parent
        level = depth[id(node)] if node is not None and id(node) in depth else -1
        for walked in reversed(chain):
            level += 1
            depth[id(walked)] = level
    return depth
