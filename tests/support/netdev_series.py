"""Series written for the netdev per-patch checks, on a clone of the 6.1 tree.

`fixes_targets` adds two commits to the clone: A (on the 6.1 base; the series' base, so a
`Fixes:` naming it is right) and B (A's child: newer than the base). Each patch is a Change:
edits of one file, a full commit message, an author. `mail_series` commits the changes on A and
mails them with `git format-patch` (base-commit: A), optionally with a cover letter, a version,
a tree in the prefix, To/Cc, and a different sender for some patches.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.support.git_series import commit_files, git

TUN, TAP = "drivers/net/tun.c", "drivers/net/tap.c"
ADA = "Ada Series <ada@example.org>"
SAM = "Sam Sender <sam@example.org>"

TUN_ANCHOR = "static void *tun_ring_recv(struct tun_file *tfile, int noblock, int *err)\n"
TAP_ANCHOR = "static ssize_t tap_do_read(struct tap_queue *q,\n"

TUN_COUNT = """/**
 * tun_queue_count() - number of queues attached to a tun device
 * @tun: the device
 *
 * Return: how many queues are attached.
 */
static unsigned int tun_queue_count(const struct tun_struct *tun)
{
	return READ_ONCE(tun->numqueues);
}

"""
# The same helper, its parameter left undocumented: a kernel-doc warning.
TUN_COUNT_UNDOCUMENTED = TUN_COUNT.replace(" * @tun: the device\n", "")
# The same helper taking a device reference the old way.
TUN_COUNT_HOLD = TUN_COUNT.replace("\treturn READ_ONCE(tun->numqueues);\n",
                                   "\tunsigned int count;\n\n\tdev_hold(tun->dev);\n"
                                   "\tcount = READ_ONCE(tun->numqueues);\n\tdev_put(tun->dev);\n"
                                   "\treturn count;\n")
TAP_LEN = """static unsigned int tap_queue_len(struct tap_queue *q)
{
	return READ_ONCE(q->ring.size);
}

"""
# inline in a .c file, and the brace on the line of the definition (checkpatch: OPEN_BRACE)
TAP_LEN_INLINE = TAP_LEN.replace("static unsigned int tap_queue_len(struct tap_queue *q)\n{",
                                 "static inline unsigned int tap_queue_len(struct tap_queue *q) {")


@dataclass
class Change:
    path: str
    subject: str
    message: str                   # the body below the subject (description and trailers)
    edits: list[tuple[str, str]]   # (old, new) replacements, each old unique in the file; ("", text) new file
    author: str = ADA
    sender: str | None = None      # mailed by someone else (in-body From: the author)
    prefix: str | None = None      # this patch's subject prefix, if not the series'


@dataclass
class Targets:
    base: str                      # commit A: the series' base and a right Fixes: target
    base_subject: str
    newer: str                     # commit B, a child of A
    newer_subject: str


def fixes_targets(repo: Path, root: str) -> Targets:
    """Commits A and B for Fixes: tags (the 6.1 test tree is one commit)."""
    tun = git(repo, "show", f"{root}:{TUN}") + "\n"
    a_subject, b_subject = "tun: say what the driver is in one line", "tun: name the copyright holders' years"
    described = tun.replace(" *  TUN - Universal TUN/TAP device driver.",
                            " *  TUN - Universal TUN/TAP device driver (tun and tap).")
    a = commit_files(repo, root, {TUN: described.encode()},
                     f"{a_subject}\n\nA commit for Fixes: tags to name.\n\nSigned-off-by: {ADA}",
                     ref="refs/heads/fixes-base")
    tun_a = git(repo, "show", f"{a}:{TUN}") + "\n"
    b = commit_files(repo, a, {TUN: tun_a.replace("Copyright (C) 1999-2002", "Copyright (C) 1999-2003").encode()},
                     f"{b_subject}\n\nNewer than the series' base.\n\nSigned-off-by: {ADA}",
                     date="2024-03-02T10:00:00+01:00", ref="refs/heads/fixes-newer")
    return Targets(a, a_subject, b, b_subject)


def mail_series(repo: Path, base: str, changes: list[Change], out: Path, *, prefix: str = "PATCH net",
                cover: bool = True, version: int = 1, to: list[str] = (), cc: list[str] = (),
                notes: dict[int, str] | None = None) -> Path:
    """Commit `changes` on `base` and mail them into the directory `out` (removed first)."""
    parent = base
    for n, change in enumerate(changes, 1):
        exists = git(repo, "ls-tree", "--name-only", parent, "--", change.path)
        content = git(repo, "show", f"{parent}:{change.path}") + "\n" if exists else ""   # "": a new file
        for old, new in change.edits:
            assert content.count(old) == 1, f"{old!r} is not unique in {change.path}"
            content = content.replace(old, new)
        parent = _commit_as(repo, parent, change, content)
    args = ["format-patch", "-q", "--thread", f"--base={base}", "-o", str(out), f"--subject-prefix={prefix}",
            *(["--cover-letter"] if cover else []), *([f"-v{version}"] if version > 1 else []),
            *(f"--to={address}" for address in to), *(f"--cc={address}" for address in cc),
            f"{base}..{parent}"]
    git(repo, *args)
    mails = sorted(path for path in out.glob("*.patch") if "0000-cover" not in path.name)
    for n, (change, mail) in enumerate(zip(changes, mails), 1):
        _rewrite(mail, change, (notes or {}).get(n, ""))
    return out


def _commit_as(repo: Path, parent: str, change: Change, content: str) -> str:
    """commit_files' commit, re-made with the change's author."""
    made = commit_files(repo, parent, {change.path: content.encode()}, f"{change.subject}\n\n{change.message}")
    name, address = change.author[:-1].split(" <")
    return git(repo, "commit-tree", f"{made}^{{tree}}", "-p", parent, "-m", f"{change.subject}\n\n{change.message}",
               env={"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": address,
                    "GIT_AUTHOR_DATE": "2024-03-01T10:00:00+01:00", "GIT_COMMITTER_DATE": "2024-03-01T10:00:00+01:00"})


def _rewrite(mail: Path, change: Change, notes: str) -> None:
    """Apply a patch's own prefix, sender and notes below --- to its mail."""
    text = mail.read_text()
    if change.prefix:
        head, rest = text.split("\nSubject: [", 1)
        text = head + "\nSubject: [" + _with_prefix(rest, change.prefix)
    if change.sender:
        text = text.replace(f"\nFrom: {change.author}\n", f"\nFrom: {change.sender}\n", 1)
        head, body = text.split("\n\n", 1)
        text = f"{head}\n\nFrom: {change.author}\n\n{body}"
    if notes:
        text = text.replace("\n---\n", f"\n---\n{notes}\n", 1)
    mail.write_text(text)


def _with_prefix(subject_rest: str, prefix: str) -> str:
    """`PATCH net 2/3] title...` with the words before the counter replaced by `prefix`."""
    inner, after = subject_rest.split("]", 1)
    counter = inner.split()[-1]
    return f"{prefix} {counter}]{after}"
