"""Stage 2: group decoded mails into patch series, pick a version, collect trailers and base info.

Contract (other stages rely on these fields; extend freely):
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from email.utils import getaddresses

from patchbench.errors import BadInput
from patchbench.mail import InputLimits, read_mails, read_mails_at
from patchbench.mail.content import PatchText, base_info, message_trailers, split_patch
from patchbench.mail.decode import parse_date, parse_person, format_person
from patchbench.mail.files import FileChange, files_touched, is_truncated
from patchbench.mail.patchid import patch_id
from patchbench.mail.sources import rereadable
from patchbench.threads import Item, Posting, build_items, group_postings, nearest_ancestors

__all__ = ["FileChange", "CarriedTrailer", "Patch", "Cover", "Series", "load_series", "load_versions",
           "find_series"]


@dataclass
class CarriedTrailer:
    """A trailer given to this patch as posted earlier, kept because the patch did not change."""
    trailer: str
    from_version: int
    from_message_id: str           # the earlier posting of the patch that was given the trailer
    reason: str                    # "patch-id unchanged"; for a RESEND "its first posting, patch-id unchanged"

    def note(self) -> str:
        return f"{self.trailer.split(':', 1)[0]} carried from v{self.from_version} ({self.reason})"


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
    patch_id: str | None = None    # `git patch-id --stable` of the diff
    carried_trailers: list[CarriedTrailer] = field(default_factory=list)   # also in `trailers`
    older_copies: list[str] = field(default_factory=list)   # Message-Ids of this part sent before in its thread
    sender: str = ""               # "Name <mail>" of the mail's From: (author is the in-body From: if any)
    recipients: list[str] = field(default_factory=list)   # addresses in the mail's To: and Cc:
    notes: str = ""                # below the `---`: changelog, diffstat
    subject_prefix: str = ""       # e.g. "PATCH net-next" (no version, no counters)
    raw: bytes = b""               # the mail as read, for checks of what the sender signed


@dataclass
class Cover:
    subject: str
    message_id: str
    body: str
    trailers: list[str] = field(default_factory=list)   # given in replies to the cover letter
    recipients: list[str] = field(default_factory=list)   # addresses in the mail's To: and Cc:


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
    prerequisite_change_ids: list[str] = field(default_factory=list)   # b4's "<change-id>:v<N>"
    prerequisite_message_ids: list[str] = field(default_factory=list)
    title: str = ""                # cover subject, else the first patch's subject
    other_series: list[str] = field(default_factory=list)   # titles of unrelated series in the source


def load_series(source: str, version: int | None = None, limits: InputLimits = InputLimits()) -> Series:
    """The series in `source` (mbox, maildir, message, directory, .gz or "-"): newest version unless asked.

    When the source holds several unrelated series, the first one stored is taken (not counting
    side threads); the others are named in `other_series`.
    Raises BadInput when the source is unreadable, truncated, past one of `limits`, or holds no patch.
    """
    versions = load_versions(source, limits)
    numbers = sorted({series.version for series in versions})
    wanted = version if version is not None else numbers[-1]
    chosen = [series for series in versions if series.version == wanted]
    if not chosen:
        listed = ", ".join(f"v{v}" for v in numbers)
        raise BadInput(f"{_name(source)}: no version {wanted} of the series (found {listed})")
    return chosen[-1]  # of two postings of one version (a resend), the later one


def load_versions(source: str, limits: InputLimits = InputLimits()) -> list[Series]:
    """Every posting of the main series in `source`, in the order stored."""
    with rereadable(source, limits) as path:
        mailbox = _Mailbox.read(path, source, limits)
        topic = _main_topic(mailbox.topics)
        mailbox.load_texts(path, [topic])
        versions = [_build(posting, topic, mailbox) for posting in topic]
    others = [_topic_title(other) for other in mailbox.topics if other is not topic]
    for series in versions:
        series.other_versions = sorted({v.version for v in versions} - {series.version})
        series.other_series = others
    return versions


def find_series(source: str, limits: InputLimits = InputLimits()) -> list[list[Series]]:
    """Every series in `source`, grouped by topic (the versions of one piece of work), oldest first."""
    with rereadable(source, limits) as path:
        mailbox = _Mailbox.read(path, source, limits)
        mailbox.load_texts(path, mailbox.topics)
        return [[_build(posting, topic, mailbox) for posting in topic] for topic in mailbox.topics]


@dataclass
class _Mailbox:
    """Grouping done on a first pass that keeps headers only; texts loaded for the series built."""

    topics: list[list[Posting]]
    replies: dict[int, list[Item]]             # by id() of the patch or cover answered
    limits: InputLimits
    texts: dict[int, str] = field(default_factory=dict)   # by position, for the mails being built
    patch_ids: dict[int, str | None] = field(default_factory=dict)   # by position, computed on demand
    raws: dict[int, bytes] = field(default_factory=dict)   # by position, the mails as read, likewise

    @classmethod
    def read(cls, path: str, source: str, limits: InputLimits) -> _Mailbox:
        items = build_items(read_mails(path, limits, _name(source)))
        postings = [p for p in group_postings(items) if p.patches]
        if not postings:
            raise BadInput(f"{_name(source)}: no patch found in {len(items)} message(s)")
        return cls(_topics(postings), _replies_by_target(items), limits)

    def load_texts(self, path: str, topics: list[list[Posting]]) -> None:
        wanted = {item.mail.position: item.mail.key
                  for topic in topics for posting in topic for item in posting.all_items()}
        for position, mail in read_mails_at(path, set(wanted), self.limits).items():
            if mail.key != wanted[position]:
                raise BadInput(f"{path}: the source changed while it was being read")
            self.texts[position] = mail.text
            self.raws[position] = mail.raw

    def text(self, item: Item) -> PatchText:
        return split_patch(self.texts.get(item.mail.position, ""))

    def patch_id(self, item: Item) -> str | None:
        if item.mail.position not in self.patch_ids:
            self.patch_ids[item.mail.position] = patch_id(self.text(item).diff)
        return self.patch_ids[item.mail.position]


def _name(source: str) -> str:
    return "standard input" if source == "-" else source


def _topics(postings: list[Posting]) -> list[list[Posting]]:
    """Join postings that thread to each other or share a title (of the cover or of a patch): the
    versions of one piece of work. Topics are ordered by first appearance."""
    parent = {id(p): id(p) for p in postings}

    def root(key: int) -> int:
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    by_title: dict[str, int] = {}
    for posting in postings:
        for other in posting.related:
            if other in parent:
                parent[root(id(posting))] = root(other)
        for item in posting.items():
            key = " ".join(item.title.lower().split())
            if key in by_title:
                parent[root(id(posting))] = root(by_title[key])
            else:
                by_title[key] = id(posting)
    groups: dict[int, list[Posting]] = {}
    for posting in sorted(postings, key=lambda p: p.first_position):
        groups.setdefault(root(id(posting)), []).append(posting)
    return list(groups.values())


def _topic_title(topic: list[Posting]) -> str:
    newest = topic[-1]
    return (newest.cover or newest.patches[min(newest.patches)]).title


def _main_topic(topics: list[list[Posting]]) -> list[Posting]:
    """The first topic stored that is not a side thread of another: a diff someone posted inside
    a series' thread is not what the mailbox is about, even when it is stored first."""
    for topic in topics:
        own = {id(posting) for posting in topic}
        if not all(_answers_other_topic(item, own) for posting in topic for item in posting.items()):
            return topic
    return topics[0]


def _answers_other_topic(item: Item, own: set[int]) -> bool:
    return any(a.group is not None and id(a.group) not in own for a in item.ancestors())


def _replies_by_target(items: list[Item]) -> dict[int, list[Item]]:
    """Replies (mails outside any posting) keyed by the patch or cover they answer, thread order kept.

    A reply whose thread headers were lost (a mailbox put together by hand) is matched by its
    subject: `Re: [PATCH v2 1/3] title` answers the v2 1/3 with that title, if there is one.
    """
    by_subject = {_subject_key(item): item for item in items if item.group is not None}
    answered = nearest_ancestors(items, lambda ancestor: ancestor.group is not None)
    replies: dict[int, list[Item]] = {}
    for item in items:
        if item.group is not None:
            continue
        target = answered[id(item)]
        if target is None and item.parent is None and item.subject.is_reply:
            target = by_subject.get(_subject_key(item))
        if target is not None:
            replies.setdefault(id(target), []).append(item)
    return replies


def _subject_key(item: Item) -> tuple[str, int | None, int]:
    return " ".join(item.subject.title.lower().split()), item.subject.index, item.subject.version


def _build(posting: Posting, topic: list[Posting], mailbox: _Mailbox) -> Series:
    cover_item = posting.cover
    patch_items = dict(posting.patches)
    if posting.numbered and any(i not in patch_items for i in range(1, posting.total + 1)):
        # b4's partial reroll: parts not resent in this version come from the newest older posting
        for older in sorted((p for p in topic if p.version < posting.version and p.total == posting.total),
                            key=lambda p: p.version, reverse=True):
            for index, item in older.patches.items():
                patch_items.setdefault(index, item)
            cover_item = cover_item or older.cover
    cover_copies = posting.copies(0) if posting.cover else ([cover_item] if cover_item else [])
    cover_trailers = _collected(cover_copies, mailbox)
    earlier = [other for other in topic if other is not posting and _posted_before(other, posting)]
    patches = []
    for index, item in sorted(patch_items.items()):
        copies = item.group.copies(index) if item.group is not None else [item]
        patch = _patch(index, copies, cover_trailers, mailbox)
        _carry_trailers(patch, item, earlier, mailbox)
        patches.append(patch)
    head = cover_item or patch_items[min(patch_items)]
    in_order = ([cover_item] if cover_item else []) + [patch_items[i] for i in sorted(patch_items)]
    base = base_info([mailbox.texts.get(item.mail.position, "") for item in in_order])
    return Series(
        version=posting.version,
        total=posting.total,
        tree=head.subject.tree,
        subject_prefix=head.subject.prefix or "PATCH",
        cover=Cover(cover_item.title, cover_item.mail.message_id, mailbox.text(cover_item).message, cover_trailers,
                    _addresses(cover_item.mail.recipients))
        if cover_item else None,
        patches=patches,
        missing=[i for i in range(1, posting.total + 1) if i not in patch_items],
        base_commit=base.base_commit,
        prerequisite_patch_ids=base.prerequisite_patch_ids,
        change_id=base.change_id,
        prerequisite_change_ids=base.prerequisite_change_ids,
        prerequisite_message_ids=base.prerequisite_message_ids,
        title=head.title,
    )


def _collected(copies: list[Item], mailbox: _Mailbox) -> list[str]:
    """Trailers given in replies to any copy of a part (a part sent twice keeps both copies' reviews)."""
    return [trailer for item in copies for reply in mailbox.replies.get(id(item), []) for trailer in reply.reply_trailers]


def _posted_before(other: Posting, posting: Posting) -> bool:
    """An older version, or an earlier posting of the same version (the first of a RESEND)."""
    if other.version != posting.version:
        return other.version < posting.version
    return other.first_position < posting.first_position


def _carry_trailers(patch: Patch, item: Item, earlier: list[Posting], mailbox: _Mailbox) -> None:
    """As b4 does: trailers given to this patch as posted before (an older version, or the first posting
    of a RESEND) are kept when its patch-id is unchanged, and said to be carried. A RESEND also keeps
    what was given to its first posting's cover letter."""
    if patch.patch_id is None:
        return
    present = {_trailer_key(trailer) for trailer in patch.trailers}
    for other in earlier:
        if other is item.group:
            continue  # a part kept from an older version in a partial reroll: its own reviews are in
        for copies in (other.copies(i) for i in sorted(other.patches)):
            matching = [copy for copy in copies if copy is not item and mailbox.patch_id(copy) == patch.patch_id]
            if not matching:
                continue
            given = _collected(matching, mailbox)
            reason = "patch-id unchanged"
            if other.version == patch.version:
                given += _collected(other.copies(0), mailbox)
                reason = "its first posting, patch-id unchanged"
            for trailer in given:
                if _trailer_key(trailer) not in present:
                    present.add(_trailer_key(trailer))
                    patch.trailers.append(trailer)
                    patch.carried_trailers.append(CarriedTrailer(trailer, other.version, matching[-1].mail.message_id,
                                                                 reason))


def _patch(index: int, copies: list[Item], cover_trailers: list[str], mailbox: _Mailbox) -> Patch:
    item = copies[-1]
    mail, inbody, text = item.mail, item.inbody, mailbox.text(item)
    author = format_person(*parse_person(inbody.author)) if inbody.author else mail.sender
    date = (parse_date(inbody.date) if inbody.date else None) or mail.date
    where = f"message {mail.position + 1}" + (f" <{mail.message_id}>" if mail.message_id else "")
    if is_truncated(text.diff):
        raise BadInput(f"patch {index} ({where}) is truncated: its last hunk ends early")
    # git cannot commit without an author, nor without a message (a Subject:, else the body's text)
    described = item.title or text.message.strip()
    if not author or not described:
        lacking = " and no ".join(name for name, value in (("author (From:)", author), ("subject", described))
                                  if not value)
        raise BadInput(f"patch {index} ({where}) has no {lacking}: a bare diff is not a mail "
                       f"(git format-patch writes one)")
    own = message_trailers(text.message)
    return Patch(
        index=index,
        subject=item.title,
        message_id=mail.message_id,
        author=author,
        date=date,
        body=text.message,
        diff=text.diff,
        trailers=_unique(own + _collected(copies, mailbox) + cover_trailers),
        files=files_touched(text.diff),
        version=item.group.version if item.group else item.subject.version,
        patch_id=mailbox.patch_id(item),
        older_copies=[copy.mail.message_id for copy in copies[:-1]],
        sender=mail.sender,
        recipients=_addresses(mail.recipients),
        notes=text.notes,
        subject_prefix=item.subject.prefix,
        raw=mailbox.raws.get(mail.position, b""),
    )


def _trailer_key(trailer: str) -> str:
    return " ".join(trailer.lower().split())


def _addresses(header: str) -> list[str]:
    return [address for _, address in getaddresses([header]) if "@" in address]


def _unique(trailers: list[str]) -> list[str]:
    seen: set[str] = set()
    result = []
    for trailer in trailers:
        key = _trailer_key(trailer)
        if key not in seen:
            seen.add(key)
            result.append(trailer)
    return result
