"""The call index: who calls each function across the whole tree, and what is held at each call.

Built once per base from a lexical scan of every C file and header (no parse: a whole tree in
about a minute on two cores), each file's scan cached by its git blob id, the merged index by the
digest of all of them. Kernel style makes the scan reliable enough: a definition's `{` and `}`
sit in column 0; inside a body, `name(` is a call; the readers and RTNL held at a call are those
taken before it and not released before it (a release followed by return/goto/break in the same
block is an early exit that leaves the main path holding them).

    index = callindex.build(root)            # or from_git(repo, commit); cached
    context = TreeContext(index, root)       # passed with each file checked (FileModel.context)

`TreeContext.entries(path, name)` gives the RCU analysis one entry contribution per way into a function that
files other than `path` provide: each call site (the readers and RTNL held there, plus what its
caller is known to hold on entry, two callers deep) and each registration (its calling context from
the kernel facts table). No way at all gives [UNKNOWN_WAY].

`need(name)` says whether a function of another file or a header needs an RCU read-side section on
entry (it reads an RCU pointer with nothing of its own held, or calls such a function, directly or
through an ops field, with nothing held): the RCU analysis judges a call of it like a dereference.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Iterable

from patchbench.checks import kfacts
from patchbench.checks.context import Way
from patchbench.tree.git import BlobReader, Git, GitFailed

UNKNOWN_WAY = frozenset({("unknown", "way")})
UNKNOWN = ("unknown",)
SUFFIXES = (".c", ".h")
# Userspace, documentation and build tooling: nothing there calls the kernel's functions.
SKIPPED_DIRS = ("tools/", "Documentation/", "scripts/", "samples/", "usr/", "LICENSES/")
DEPTH = 2    # callers of callers consulted for a caller's own entry
# Bump when scan() changes what it records: every stored scan and index is then rebuilt.
SCAN_VERSION = 11
FANOUT = 32  # files consulted for a caller's own entry (the first, by path): a meet needs few
NEED_DEPTH = 1   # calls between a function and the RCU read that makes it need a section on entry

FAMILIES = ("rcu", "rcu_bh", "rcu_sched", "srcu", "bh", "preempt", "irq", "spin", "rtnl")
_BIT = {family: 1 << i for i, family in enumerate(FAMILIES)}
_BITS = tuple(_BIT.values())
# In a call's bits: a named lock (a mutex, a lockdep assert) was taken or asserted before it in the
# body: the function relies on a lock of its own, not on its caller's section (no family: Way
# ignores it).
LOCKED = 1 << len(FAMILIES)
_GUARDS = frozenset({b"guard", b"scoped_guard"})

_COMMENT_OR_STRING = re.compile(rb'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"', re.S)
_BODY_OPEN = re.compile(rb"\n\{")
_BODY_CLOSE = re.compile(rb"\n\}")
_CALL = re.compile(rb"\b([A-Za-z_]\w*)\s*\(")
# Every byte that is not a word character becomes a blank: split() then gives the words (every
# identifier _CALL finds, and numbers).
_WORDS_ONLY = bytes(c if chr(c).isascii() and (chr(c).isalnum() or c == 0x5F) else 0x20 for c in range(256))
_NOT_NAMES = frozenset(b"""if for while switch return sizeof typeof __typeof__ __typeof defined do case
    __attribute__ __attribute __printf __must_hold __acquires __releases __section __aligned
    __diag_ignore __scanf __alloc_size __assume_aligned __counted_by __cond_acquires
    __cond_releases __no_context_analysis __guarded_by __pt_guarded_by""".split())
_INITIALISER = re.compile(rb"\bstruct[ \t]+(\w+)[ \t]+\w+(?:\[\w*\])?[ \t]*=[ \t]*\{")
_FIELD_INIT = re.compile(rb"\.\s*(\w+)\s*=\s*&?\s*([A-Za-z_]\w*)\s*[,}\n]")
_FIELD_SET = re.compile(rb"(?:->|\.)\s*(\w+)\s*=\s*&?\s*([A-Za-z_]\w*)\s*;")
_STATIC = re.compile(rb"\bstatic\b")
_LOCAL_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.M)
_MUST_HOLD_RCU = re.compile(rb"__must_hold\s*\(\s*RCU\s*\)|__releases\s*\(\s*RCU\s*\)")
# cleanup.h guard classes: DEFINE_GUARD(name, type, lock, unlock) holds the lock expression with
# _T the guarded pointer; DEFINE_LOCK_GUARD_1(name, type, lock, unlock, ...) with _T->lock it
_GUARD_DEFINITION = re.compile(rb"^[ \t]*(DEFINE_GUARD|DEFINE_LOCK_GUARD_1)\s*\(", re.M)
_GUARD_PLACEHOLDER = {b"DEFINE_GUARD": r"\b_T\b", b"DEFINE_LOCK_GUARD_1": r"\b_T->lock\b"}


# -- the scan of one file ----------------------------------------------------------------------

@lru_cache(maxsize=1)
def _ops() -> tuple[dict[bytes, tuple[int, int, bool]], dict[bytes, int], frozenset, dict[bytes, str]]:
    """(spelling -> (bits, +1/-1, is a try), assert spelling -> bits stated, registration
    spellings, guard class -> the spelling it means), from the kernel facts table."""
    ops = {}
    for name, op in kfacts.lock_ops().items():
        bits = 0
        if op.kind in _BIT and (op.is_reader or op.kind == "rtnl"):
            bits |= _BIT[op.kind]
        if op.atomic:
            bits |= _BIT["spin"]
        if op.implies:
            bits |= _BIT[op.implies]
        if bits and op.action in ("acquire", "try", "try_fail", "release"):
            ops[name.encode()] = (bits, -1 if op.action == "release" else 1, op.action == "try")
    asserts = {name.encode(): _BIT["rcu"] for name in kfacts.names("rcu", "asserts", "reader")}
    asserts.update({name.encode(): _BIT["rtnl"] for name in kfacts.names("rcu", "asserts", "rtnl")})
    asserts.update({name.encode(): _BIT["rtnl"] for name, op in kfacts.lock_ops().items()
                    if op.action == "assert" and op.kind == "rtnl"})
    registrations = frozenset(name.encode() for name in kfacts.registration_calls())
    guards = {cls.encode(): spelling for cls, spelling in kfacts.table()["guard"].items()}
    return ops, asserts, registrations, guards


def scan(source: bytes) -> dict:
    """{"defs": {name: [global, stated bits]}, "calls": {caller: [[callee, bits], ...]},
    "regs": [[function, kind, struct], ...], "reads": {name: [primitive, line]},
    "queue": {name: [params, [[spelling, argument], ...]]}} of one file's text; "reads" has the
    functions that read an RCU-protected pointer with nothing of their own held (no reader, RTNL or
    named lock before it, no lockdep condition): the first such read; "queue" the functions calling
    a tx queue stop/wake/start spelling."""
    ops, asserts, registration_calls, guards = _ops()
    named, reads_needing, rtnl_asserts = _named_locks(), _reads(), _rtnl_asserts()
    queue_ops = _queue_spellings()
    text = _COMMENT_OR_STRING.sub(b" ", source)
    defs: dict[str, list] = {}
    calls: dict[str, list] = {}
    regs: list[list] = []
    reads: dict[str, list] = {}
    lines = None   # where each read is, computed for the files that have one
    queue: dict[str, list] = {}
    position = 0
    bodies = []
    for opening in _BODY_OPEN.finditer(text):
        start = opening.start() + 1
        if start < position:
            continue
        closing = _BODY_CLOSE.search(text, start)
        if closing is None:
            break
        position = closing.end()
        name, is_static, stated = _header(text, start)
        if name is None:
            continue
        bodies.append((name, start, position))
        defs[name] = [not is_static, stated]
    for name, start, end in bodies:
        body = text[start:end]
        held = [0] * len(_BITS)
        mask = 0
        locked = 0   # LOCKED once a named lock is taken or asserted
        at = 0   # where the last lock operation was found: positions only matter for those
        read_at = 0   # where the last read was found
        sites: set[tuple[bytes, int]] = set()
        taken: list[list[str]] = []   # [spelling, argument text] of each lock call
        queued: list[list[str]] = []  # [spelling, queue argument text] of each tx queue call
        queue_at = 0
        for word in _CALL.findall(body):   # names only: a match object per call costs 10x
            if word in queue_ops and word.decode() != name:
                found_at = re.compile(rb"\b" + word + rb"\s*\(").search(body, queue_at)
                queue_at = found_at.end() if found_at else queue_at
                arguments = _arguments(body, queue_at) if found_at else []
                position = queue_ops[word]
                queued.append([word.decode(), arguments[position].decode("latin-1")
                               if position < len(arguments) else ""])
            if word in _lock_spellings():
                at = body.find(word, at) + len(word)
                arguments = _arguments(body, body.find(b"(", at) + 1)
                taken.append([word.decode(), arguments[0].decode("latin-1") if arguments else ""])
            if word in named or word in rtnl_asserts:
                locked = LOCKED
            op = ops.get(word)
            if op is None and word in _GUARDS:
                at = body.find(word, at)
                cls = re.match(rb"\s*\(\s*(\w+)", body[at + len(word):at + len(word) + 40])
                spelling = guards.get(cls.group(1)) if cls else None
                op = ops.get(spelling.encode()) if spelling else None
                at += len(word)
                if spelling is not None and spelling.encode() in named:
                    locked = LOCKED
            if word in reads_needing:
                call = re.compile(rb"\b" + word + rb"\s*\(").search(body, read_at)
                read_at = call.end() if call else read_at
                condition = reads_needing.get(word)
                if not (mask or locked) and name not in reads and call and \
                        (condition is None or len(_arguments(body, call.end())) <= condition):
                    lines = lines or _Lines(source)
                    reads[name] = [word.decode(), lines.of(text, start + call.start())]
            if op is not None:
                bits, delta, _ = op
                if delta < 0 and _early_exit(body, at):
                    continue
                mask = 0
                for i, bit in enumerate(_BITS):
                    if bits & bit:
                        held[i] = max(0, held[i] + delta)
                    if held[i]:
                        mask |= bit
                continue
            sites.add((word, mask | locked))
        for word, _ in sites:
            if word in asserts:
                defs[name][1] |= asserts[word]
            elif word in registration_calls:
                regs.extend(_registered(word, body))
        calls[name] = sorted([callee.decode("latin-1"), bits] for callee, bits in sites if callee not in _NOT_NAMES)
        effect = _net_effect(taken)
        if effect:   # a lock wrapper: what it leaves taken or released, and its parameters
            defs[name].append([_params(text, start), effect])
        if queued:
            queue[name] = [_params(text, start), queued]
    if b"=" not in text or not _FIELD_INIT.search(text):
        starts, structs = [], []
    else:
        initialisers = list(_INITIALISER.finditer(text))
        starts = [m.start() for m in initialisers]
        structs = [m.group(1).decode("latin-1") for m in initialisers]
    for match in _FIELD_INIT.finditer(text):
        at = _last_before(starts, match.start())
        regs.append([match.group(2).decode("latin-1"), match.group(1).decode("latin-1"),
                     structs[at] if at >= 0 else ""])
    fields = kfacts.registration_fields()
    for match in _FIELD_SET.finditer(text):
        kind = fields.get(match.group(1).decode("latin-1"))
        if kind:
            regs.append([match.group(2).decode("latin-1"), kind, ""])
    return {"defs": defs, "calls": calls, "regs": regs, "reads": reads, "queue": queue,
            "guards": guard_classes(text),
            "includes": local_includes(source)}


def local_includes(source: bytes) -> list[str]:
    """The headers a file includes by a quoted name (its driver's own), sorted."""
    return sorted({name.decode("latin-1") for name in _LOCAL_INCLUDE.findall(source)})


def guard_classes(text: bytes) -> dict[str, list[str]]:
    """{class: [lock spelling, [argument texts with the guarded object as "_T"]]} of the guard
    classes the text defines whose lock expression is one call of a lock spelling of the facts
    table (DEFINE_GUARD(mvm, struct iwl_mvm *, mutex_lock(&_T->mutex), ...) -> mvm: mutex_lock,
    ["&_T->mutex"]): a guard(mvm)(m) takes what mutex_lock(&m->mutex) takes."""
    if b"DEFINE_" not in text:
        return {}
    found = {}
    for match in _GUARD_DEFINITION.finditer(text):
        arguments = _arguments(text, match.end())
        if len(arguments) < 4:
            continue
        call = re.fullmatch(rb"([A-Za-z_]\w*)\s*\((.*)\)", arguments[2], re.S)
        if call is None or call.group(1) not in _lock_spellings():
            continue
        op = kfacts.lock_op(call.group(1).decode())
        if op.action not in ("acquire", "try_fail"):
            continue
        inner = _arguments(call.group(2) + b")", 0)
        placeholder = _GUARD_PLACEHOLDER[match.group(1)]
        found[arguments[0].decode("latin-1")] = [
            call.group(1).decode(), [re.sub(placeholder, "_T", b"".join(a.split()).decode("latin-1"))
                                     for a in inner]]
    return found


class _Lines:
    """Line numbers of the original text for offsets of its comment- and string-blanked copy."""

    def __init__(self, source: bytes):
        self.blanked: list[tuple[int, int]] = []   # (offset in the copy, newlines removed before)
        removed_chars = removed_lines = 0
        for match in _COMMENT_OR_STRING.finditer(source):
            removed_lines += match.group().count(b"\n")
            removed_chars += len(match.group()) - 1
            self.blanked.append((match.end() - removed_chars, removed_lines))

    def of(self, text: bytes, offset: int) -> int:
        at = _last_before([b for b, _ in self.blanked], offset + 1)
        return text.count(b"\n", 0, offset) + 1 + (self.blanked[at][1] if at >= 0 else 0)


@lru_cache(maxsize=1)
def _named_locks() -> frozenset[bytes]:
    """Spellings that take, try or assert a named lock or RTNL (not a reader): after one, what the
    function reads is under its own lock (for the reads), and its calls are too."""
    return frozenset(name.encode() for name, op in kfacts.lock_ops().items()
                     if not op.is_reader and op.action != "release")


@lru_cache(maxsize=1)
def _reads() -> dict[bytes, int | None]:
    """RCU read primitives that need a reader held -> the index of their lockdep condition
    argument (a read given one is checked against its lock, not a caller's section), from the
    facts table: rcu_dereference*, srcu_dereference, list_first_or_null_rcu. Not _protected, nor
    the forms RTNL also satisfies (rcu_dereference_rtnl: its callers hold one or the other), nor
    the list walks (statement macros, untracked), which accept the update-side lock a caller
    elsewhere may hold under any name. The list accessors (list_first_or_null_rcu) are reads:
    the update-side lock satisfies them only where the analysis sees it held (ppp's
    ndo_fill_forward_path reads with nothing held, so dev_fill_forward_path()'s callers need a
    section)."""
    readers = kfacts.readers()
    return {name.encode(): need.condition_arg for name, need in kfacts.dereferences().items()
            if need.strict & readers and "rtnl" not in need.strict
            and not (need.update_side and not need.tracked)}


@lru_cache(maxsize=1)
def _rtnl_asserts() -> frozenset[bytes]:
    return frozenset(name.encode() for name in kfacts.names("rcu", "asserts", "rtnl"))


@lru_cache(maxsize=1)
def _queue_spellings() -> dict[bytes, int]:
    """tx queue spelling -> the position of the argument naming its queue."""
    return {name.encode(): entry[3] for name, entry in kfacts.table()["queue"]["spellings"].items()}


@lru_cache(maxsize=1)
def _lock_spellings() -> frozenset[bytes]:
    return frozenset(name.encode() for name, op in kfacts.lock_ops().items()
                     if op.action in ("acquire", "release", "try_fail"))


def _net_effect(taken: list[list[str]]) -> list[list[str]]:
    """The lock calls of a body whose lock (spelling family and argument text) is not balanced
    in it: what a wrapper (foo_chan_lock() around mutex_lock()) does to its caller."""
    balance: dict[tuple[str, str], int] = {}
    first: dict[tuple[str, str], list[str]] = {}
    for spelling, argument in taken:
        op = kfacts.lock_op(spelling)
        lock = (op.kind, "".join(argument.split()))
        balance[lock] = balance.get(lock, 0) + (-1 if op.action == "release" else 1)
        first.setdefault(lock, [spelling, lock[1]])
        if op.action == "release":
            first[lock] = [spelling, lock[1]] if balance[lock] < 0 else first[lock]
    return [first[lock] for lock, count in balance.items() if count]


_PARAM = re.compile(rb"([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*$")


_TRAILING_ANNOTATION = re.compile(rb"(?:\s*\b__\w+\s*\([^()]*(?:\([^()]*\)[^()]*)*\))+\s*$")


def _params(text: bytes, brace: int) -> list[str]:
    """Parameter names of the function whose body opens at brace (after the parameter list may
    come annotations: `__releases(&rx->sk.sk_lock.slock)`)."""
    header = text[max(0, brace - 400):brace]
    trailing = _TRAILING_ANNOTATION.search(header)
    if trailing is not None:
        header = header[:trailing.start()]
    close = header.rfind(b")")
    depth, i = 0, close
    while i >= 0:
        depth += header[i:i + 1] == b")"
        depth -= header[i:i + 1] == b"("
        if depth == 0:
            break
        i -= 1
    names = []
    for part in header[i + 1:close].split(b","):
        match = _PARAM.search(part.strip())
        names.append(match.group(1).decode("latin-1") if match and part.strip() != b"void" else "")
    return names


def _last_before(starts: list[int], at: int) -> int:
    lo, hi = 0, len(starts)
    while lo < hi:
        mid = (lo + hi) // 2
        if starts[mid] < at:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


def _header(text: bytes, brace: int) -> tuple[str | None, bool, int]:
    """(name, static, stated bits) of the function whose body opens at `brace`, or (None, ...)
    when the block is no function (a struct or array initialiser)."""
    window = text[max(0, brace - 400):brace]
    cut = max(window.rfind(b";\n"), window.rfind(b"}\n"), window.rfind(b"\n\n"), window.rfind(b"\n#"))
    header = window[cut + 2:] if cut >= 0 else window
    if header[:1] == b"#" or b"\n#" in header:   # ends in a preprocessor line: the header follows it
        header = header[header.rfind(b"\n", 0, header.rfind(b"\n#") + 2 if b"\n#" in header else 1) + 1:]
    if b"(" not in header or b"=" in header.split(b"(", 1)[0]:
        return None, False, 0
    for match in _CALL.finditer(header):
        word = match.group(1)
        if word not in _NOT_NAMES and not word.isupper():
            stated = _BIT["rcu"] if _MUST_HOLD_RCU.search(header) else 0
            return word.decode("latin-1"), bool(_STATIC.search(header[:match.start()])), stated
    return None, False, 0


_EXIT = re.compile(rb"\b(return|goto|break|continue)\b")


def _early_exit(body: bytes, at: int) -> bool:
    """A release followed, before its block closes, by return/goto/break: an early exit."""
    end = body.find(b"}", at)
    if end < 0:
        return False
    tail = body[at:end]
    return b"{" not in tail and _EXIT.search(tail) is not None


def _registered(word: bytes, body: bytes) -> list[list]:
    """The functions a registration call in body hands to the kernel: [[name, kind, ""], ...]."""
    found = []
    for call in re.finditer(rb"\b" + word + rb"\s*\(", body):
        args = [arg.decode("latin-1") for arg in _arguments(body, call.end())]
        for argument, kind in kfacts.registered_by(word.decode(), args):
            name = argument.lstrip("&").strip()
            if re.fullmatch(r"[A-Za-z_]\w*", name):
                found.append([name, kind, ""])
    return found


def _arguments(body: bytes, open_at: int) -> list[bytes]:
    """The top-level argument texts of the call whose `(` ends just before open_at."""
    depth, start, args = 1, open_at, []
    for i in range(open_at, len(body)):
        c = body[i]
        if c in b"([{":
            depth += 1
        elif c in b")]}":
            depth -= 1
        if (c == 0x2C and depth == 1) or depth == 0:
            args.append(body[start:i].strip())
            start = i + 1
            if depth == 0:
                break
    return args


# -- the merged index --------------------------------------------------------------------------

@dataclass
class CallIndex:
    """The merged index of one tree, an SQLite file asked per name (nothing loaded up front):
    which files define and call each name, registrations, header lock wrappers. What each call
    holds is read from the calling file's scan (stored by blob id) when a way in is asked for."""
    digest: str                                           # of every (path, blob id)
    directory: Path                                       # where the scans and the database are
    _entries: dict = field(default_factory=dict, repr=False)
    _scans: dict = field(default_factory=dict, repr=False)
    _sites: dict = field(default_factory=dict, repr=False)   # number -> (its scan, callee -> sites)
    _needing: frozenset | None = field(default=None, repr=False)
    _connection: tuple = field(default=(), repr=False)    # (pid, sqlite3.Connection)
    # answers already given: the rules ask about the same names for every function of a file
    _answers: dict = field(default_factory=dict, repr=False)
    _wrappers: dict | None = field(default=None, repr=False)
    # _lock_effect's answers by (lookup, name): asked of every call of every function walked
    _effects: dict = field(default_factory=dict, repr=False)
    _calls_a_need: tuple = field(default=(), repr=False)   # (source, answer) of the last file asked

    def _query(self, sql: str, *args) -> list[tuple]:
        key = (sql, args)
        found = self._answers.get(key)
        if found is None:
            if not self._connection or self._connection[0] != os.getpid():   # not across a fork
                # immutable: an index is written once, under its digest, and put in place by a
                # rename; SQLite then takes no file locks and looks for no journal at each query
                database = f"file:{self.directory / (self.digest + '.sqlite')}?mode=ro&immutable=1"
                self._connection = (os.getpid(), sqlite3.connect(database, uri=True, check_same_thread=False))
            if len(self._answers) > 100_000:
                self._answers.clear()
            found = self._answers[key] = tuple(self._connection[1].execute(sql, args).fetchall())
        return list(found)

    def defs(self, name: str) -> list[tuple[int, bool, int]]:
        """(file, global, stated bits) of each definition of `name`."""
        return [(f, bool(g), s) for f, g, s in
                self._query("SELECT file, global, stated FROM defs WHERE name = ? ORDER BY file", name)]

    def callers(self, name: str) -> list[int]:
        return [f for (f,) in self._query("SELECT file FROM callers WHERE name = ? ORDER BY file", name)]

    def regs(self, name: str) -> list[tuple[int, str, str]]:
        return self._query("SELECT file, kind, struct FROM regs WHERE name = ? ORDER BY file, kind, struct", name)

    def effect_of(self, name: str) -> list | None:
        """[params, [[lock spelling, argument text], ...]] of the lock calls a global function of
        a .c file leaves unbalanced (see _net_effect), when every such definition says the same."""
        found = []
        for number, is_global, _ in self.defs(name):
            if not is_global:
                continue
            path = self._query("SELECT path FROM files WHERE number = ?", number)
            if not path or not path[0][0].endswith(".c"):
                continue
            definition = self.scan_of(number)["defs"].get(name, [])
            found.append(definition[2] if len(definition) > 2 else None)
        return found[0] if found and all(f == found[0] for f in found) else None

    def wrapper_of(self, name: str) -> list | None:
        if self._wrappers is None:   # a few hundred rows, asked of every call in every file: read once
            self._wrappers = dict(self._query("SELECT name, effect FROM wrappers"))
        found = self._wrappers.get(name)
        return json.loads(found) if found else None

    def c_wrapper_of(self, name: str) -> list | None:
        """[params, effect] of the global function `name` of a .c file that leaves locks taken
        or released in its caller (ovs_lock()), None for others (or when definitions differ)."""
        found = self._query("SELECT effect FROM c_wrappers WHERE name = ?", name)
        return json.loads(found[0][0]) if found else None

    def guard_of(self, name: str) -> list | None:
        found = self._query("SELECT effect FROM guards WHERE name = ?", name)
        return json.loads(found[0][0]) if found else None

    @cached_property
    def queue_wrappers(self) -> dict[str, list]:
        """Header function -> [params, [[tx queue spelling, queue argument text], ...]]."""
        return {name: json.loads(effect) for name, effect in
                self._query("SELECT name, effect FROM queue_wrappers ORDER BY name")}

    def blob(self, number: int) -> str:
        found = self._query("SELECT blob FROM files WHERE number = ?", number)
        return found[0][0] if found else ""

    def scan_of(self, number: int) -> dict:
        found = _recently_used(self._scans, number)
        if found is None:
            found = _remember(self._scans, number, _load_scan(self.directory, self.blob(number)) or
                              {"defs": {}, "calls": {}, "regs": [], "includes": []})
        return found

    def sites(self, name: str, number: int) -> list[tuple[str, int]]:
        """(caller, bits) of each call of `name` in file `number`."""
        scan = self.scan_of(number)
        by_callee = _recently_used(self._sites, number)
        if by_callee is None or by_callee[0] is not scan:   # the file's calls, by callee, once
            table: dict[str, list] = {}
            for caller, called in sorted(scan["calls"].items()):
                for callee, bits in called:
                    table.setdefault(callee, []).append((caller, bits))
            by_callee = _remember(self._sites, number, (scan, table))
        return list(by_callee[1].get(name, ()))

    def calls_a_need(self, source: bytes) -> bool:
        """Whether a file's text calls a function that needs an RCU read-side section on entry: a
        file that mentions no RCU at all may still call one."""
        if self._calls_a_need and self._calls_a_need[0] is source:   # asked again of the same file
            return self._calls_a_need[1]
        # its words first, calls only if one is named: most files name none, and splitting the text
        # into words costs a quarter of finding its calls
        needing = self.needing()
        answer = not needing.isdisjoint(source.translate(_WORDS_ONLY).split()) and \
            not needing.isdisjoint(_CALL.findall(source))
        self._calls_a_need = (source, answer)
        return answer

    def needing(self) -> frozenset[bytes]:
        """The names of every function that needs an RCU read-side section on entry."""
        if self._needing is None:
            self._needing = frozenset(name.encode("latin-1") for (name,) in
                                      self._query("SELECT DISTINCT name FROM needs"))
        return self._needing

    def need_of(self, name: str) -> tuple[str, str, int, str] | None:
        """(primitive, path of the read, its line, callee it is reached through or "") when every
        global definition of `name` needs an RCU read-side section on entry (see _needs)."""
        rows = self._query("SELECT file, primitive, origin, line, via FROM needs WHERE name = ? "
                           "ORDER BY file", name)
        definitions = [f for f, is_global, _ in self.defs(name) if is_global]
        needing = [row for row in rows if row[0] in definitions]
        if not definitions or len({row[0] for row in needing}) < len(set(definitions)):
            return None
        _, primitive, origin, line, via = needing[0]
        path = self._query("SELECT path FROM files WHERE number = ?", origin)
        return primitive, path[0][0] if path else "", line, via

    def opens_section(self, name: str) -> bool:
        """Every global definition of `name` opens an explicit read-side section of its own: a
        call in its body, or in that of a static function of its file it calls with nothing held,
        is made with an rcu_read_lock*() or srcu_read_lock() section held (sunrpc_cache_lookup_rcu()
        -> sunrpc_cache_find_rcu(), which takes rcu_read_lock())."""
        definitions = [number for number, is_global, _ in self.defs(name) if is_global]
        if not definitions:
            return False
        for number in definitions:
            calls = self.scan_of(number)["calls"]
            own = calls.get(name, [])
            if any(bits & _SECTION_BITS for _, bits in own):
                continue
            if not any(any(bits & _SECTION_BITS for _, bits in calls.get(callee, []))
                       for callee, held in own if held == 0 and self.is_local(callee, number)):
                return False
        return True

    def number(self, path: str) -> int:
        found = self._query("SELECT number FROM files WHERE path = ?", path)
        return found[0][0] if found else -1

    def siblings(self, path: str) -> list[int]:
        """The other .c files of `path`'s directory (not of its subdirectories), in path order."""
        directory = os.path.dirname(path)
        prefix = f"{directory}/" if directory else ""
        return [number for number, other in
                self._query("SELECT number, path FROM files WHERE path LIKE ? ESCAPE '!' ORDER BY path",
                            prefix.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%.c")
                if other != path and "/" not in other[len(prefix):]]

    def is_local(self, name: str, number: int) -> bool:
        """`name` is a static function of file `number` (a .c file): its calls there are its own."""
        return any(f == number and not is_global for f, is_global, _ in self.defs(name))

    def ways(self, path: str, name: str, depth: int = 0) -> list[Way]:
        """The ways into the global function `name` from files other than `path`."""
        here = self.number(path)
        ways = [self.registered(kind, struct) for number, kind, struct in self.regs(name)
                if number != here]
        numbers = [n for n in self.callers(name) if n != here and not self.is_local(name, n)]
        if depth and len(numbers) > FANOUT:   # a caller's own callers: enough of them to meet
            numbers = numbers[:FANOUT]
        for number in numbers:
            for caller, bits in self.sites(name, number):
                held, known = self.entry(number, caller, depth + 1)
                ways.append(Way(_families(bits) | held, known))
        return ways

    @staticmethod
    def registered(kind: str, struct: str) -> Way:
        context = kfacts.context_of(kind, struct)
        return Way(_context_families(context)) if context else Way(frozenset(), "unknown")

    def entry(self, number: int, name: str, depth: int) -> tuple[frozenset, str]:
        """(families, known) held on entry to `name` of file `number`, from what it states and
        its ways in (DEPTH files away; further, or with no way in, it is unknown: "caller").

        A function of this process's answers only, never of the order they were asked in (a lint
        asks them file after file): they are kept by (file, name, depth), as a caller DEPTH files
        away is cut short where one asked first-hand is not; and static functions of a file that
        reach each other (recursion) are solved together: the most that all their ways in, from
        outside the cycle and along it, hold in common (the greatest fixpoint), instead of from a
        stand-in for the one asked first, which made the answers depend on which that was."""
        key = (number, name, depth)
        if key not in self._entries:
            self._solve(key)
        return self._entries[key]

    def _parts(self, key: tuple[int, str, int]) -> tuple[int, list[Way], list[tuple[tuple, int]]]:
        """(stated bits, ways in known without this file's cycles, [(caller's key, bits held at
        the call)] for the static callers of the same file at the same depth)."""
        number, name, depth = key
        found = [(is_global, stated) for n, is_global, stated in self.defs(name) if n == number]
        is_global, stated = found[0] if found else (True, 0)
        if depth >= DEPTH:
            return stated, [], []
        if is_global:   # its callers' entries are one depth further: never a cycle with this one
            return stated, self.ways("", name, depth), []
        # a static function: only its own file reaches it (no hop counted)
        ways = [self.registered(kind, struct) for n, kind, struct in self.regs(name) if n == number]
        return stated, ways, [((number, caller, depth), bits) for caller, bits in self.sites(name, number)]

    def _solve(self, root: tuple[int, str, int]) -> None:
        """Settle the entries `root` reaches through static callers of its file, a strongly
        connected group at a time (Tarjan), callers' groups first."""
        order: dict[tuple, int] = {}
        low: dict[tuple, int] = {}
        stack: list[tuple] = []
        waiting: set[tuple] = set()   # on the stack
        parts: dict[tuple, tuple] = {}

        def visit(key: tuple) -> None:
            order[key] = low[key] = len(order)
            stack.append(key)
            waiting.add(key)
            parts[key] = self._parts(key)
            for caller, _ in parts[key][2]:
                if caller in self._entries:
                    continue
                if caller not in order:
                    visit(caller)
                    low[key] = min(low[key], low[caller])
                elif caller in waiting:
                    low[key] = min(low[key], order[caller])
            if low[key] == order[key]:
                at = len(stack) - 1 - stack[::-1].index(key)
                group = stack[at:]
                del stack[at:]
                waiting.difference_update(group)
                self._settle(group, parts)

        visit(root)

    def _settle(self, group: list[tuple], parts: dict[tuple, tuple]) -> None:
        """The entries of one group, from the top down (None: not yet limited by any way in)
        until nothing changes: the answer does not depend on the order they are visited in."""
        values: dict[tuple, tuple | None] = {key: None for key in group}
        if len(group) == 1 and all(caller != group[0] for caller, _ in parts[group[0]][2]):
            values[group[0]] = self._value(parts[group[0]], values)   # no cycle: once is enough
            changed = False
        else:
            changed = True
        while changed:
            changed = False
            for key in group:
                value = self._value(parts[key], values)
                if value != values[key]:
                    values[key] = value
                    changed = True
        for key in group:   # reached only from within the cycle: no way in
            stated = parts[key][0]
            self._entries[key] = values[key] or (_families(stated), "yes" if stated else "caller")

    def _value(self, part: tuple, values: dict) -> tuple[frozenset, str] | None:
        stated, ways, callers = part
        ways = list(ways)
        limited = True
        for caller, bits in callers:
            held = values[caller] if caller in values else self._entries[caller]
            if held is None:   # a caller of the cycle not limited yet: adds nothing
                limited = False
                continue
            ways.append(Way(_families(bits) | held[0], held[1]))
        known_ways = [w for w in ways if w.known != "unknown"]
        if known_ways:
            held = frozenset.intersection(*(w.families for w in known_ways))
            known = "yes" if all(w.known == "yes" for w in known_ways) else "caller"
        elif not limited:
            return None
        else:
            held, known = frozenset(), "caller"
        return held | _families(stated), "yes" if stated else known


_SECTION_BITS = _BIT["rcu"] | _BIT["rcu_bh"] | _BIT["rcu_sched"] | _BIT["srcu"]


def _families(bits: int) -> frozenset:
    return frozenset(family for family, bit in _BIT.items() if bits & bit)


def _context_families(context: kfacts.Context) -> frozenset:
    return context.readers | (frozenset({"rtnl"}) if "rtnl" in context.locks else frozenset())


# -- building and caching ----------------------------------------------------------------------

def fingerprint() -> str:
    """Of the scan (SCAN_VERSION) and the parts of the facts table a scan reads (locks, guards, registration
    calls and fields, asserts, RCU reads): a changed scan never reads stale entries, while a new calling
    context (applied when a way in is asked for) keeps them."""
    digest = hashlib.sha1(f"scan {SCAN_VERSION}".encode())
    table = kfacts.table()
    read = {"lock": table["lock"], "guard": table["guard"], "registration": table["registration"],
            "asserts": table["rcu"]["asserts"], "deref": table["rcu"]["deref"],
            "readers": table["rcu"]["readers"], "helpers": table["rcu"]["helpers"],
            "queue": table["queue"]["spellings"]}
    digest.update(json.dumps(read, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    """$PATCHBENCH_INDEX_CACHE, default ~/.cache/patchbench/callindex: apart from the facts
    cache ($PATCHBENCH_CACHE), which runs often point at a fresh directory, since an index of
    blob ids never goes stale and costs a minute to build."""
    root = os.environ.get("PATCHBENCH_INDEX_CACHE") or Path.home() / ".cache" / "patchbench" / "callindex"
    return Path(root) / fingerprint()


def indexed(path: str) -> bool:
    return path.endswith(SUFFIXES) and not path.startswith(SKIPPED_DIRS)


def tree_root(paths: Iterable[str]) -> Path | None:
    """The kernel tree holding the first of paths (the directory with Kbuild and MAINTAINERS)."""
    for name in paths:
        current = Path(name).resolve()
        for directory in (current, *current.parents):
            if (directory / "Kbuild").is_file() and (directory / "MAINTAINERS").is_file():
                return directory
        return None
    return None


# What a worker reads blobs from: ("files", root) or ("git", git dir); set before forking.
_SOURCE: list[tuple[str, Path]] = []
_READER: list[BlobReader] = []


def _read(path: str, blob: str) -> bytes:
    kind, where = _SOURCE[-1]
    if kind == "files":
        return (where / path).read_bytes()
    if not _READER or _READER[-1].process.poll() is not None:   # one cat-file per worker process
        _READER.append(Git(where).blobs())
    data = _READER[-1].read(blob)
    if data is None:
        raise OSError(f"git cat-file: no blob {blob} ({path})")
    return data


def _scan_blob(item: tuple[str, str, Path]) -> dict:
    """Scan one blob, store the scan by blob id, return what the merged index keeps of it."""
    path, blob, directory = item
    found = _load_scan(directory, blob)
    if found is None:
        found = scan(_read(path, blob))
        _store_scan(directory, blob, found)
    return {"defs": found["defs"], "regs": found["regs"], "reads": found["reads"], "queue": found["queue"],
            "guards": found["guards"],
            "called": sorted({c for called in found["calls"].values() for c, _ in called})}


# Scans (and their calls by callee) kept per process, the least recently used dropped first. Lint of
# 7.2's drivers/net + net reads 3421 scans; emptied at 512 the cache read 5631, with 512 kept in
# this order 4870, 1024 4326, 2048 3536 (but a worker's peak grew from 154 to 233 MB; 1024: 202 MB).
SCANS_KEPT = 1024


def _recently_used(kept: dict, number: int):
    """kept[number], now the most recently used (dicts keep insertion order), or None."""
    found = kept.pop(number, None)
    if found is not None:
        kept[number] = found
    return found


def _remember(kept: dict, number: int, value):
    if len(kept) >= SCANS_KEPT:
        del kept[next(iter(kept))]
    kept[number] = value
    return value


def _scan_path(directory: Path, blob: str) -> Path:
    return directory / "scans" / blob[:2] / f"{blob}.json"


def _load_scan(directory: Path, blob: str) -> dict | None:
    try:
        return json.loads(_scan_path(directory, blob).read_bytes())
    except (OSError, ValueError):
        return None


def _store_scan(directory: Path, blob: str, found: dict) -> None:
    target = _scan_path(directory, blob)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(found, separators=(",", ":")))
        partial.replace(target)
    except OSError:
        pass   # a read-only cache only costs time


def _build(blobs: list[tuple[str, str]], source: tuple[str, Path], jobs: int) -> CallIndex:
    """The index of (path, blob id) pairs read from `source`; scans of blobs seen before (in
    any tree) are read back from their store."""
    from patchbench.checks import facts   # the process pool lives there
    blobs = sorted(blobs)
    digest = hashlib.sha1("\n".join(f"{p} {b}" for p, b in blobs).encode()).hexdigest()
    directory = cache_dir()
    stored = directory / f"{digest}.sqlite"
    if stored.is_file():
        return _in_use(digest, directory)
    _SOURCE.append(source)
    try:
        summaries = facts.parallel(_scan_blob, [(path, blob, directory) for path, blob in blobs], jobs)
    finally:
        _SOURCE.remove(source)
        while _READER:
            _READER.pop().close()
    directory.mkdir(parents=True, exist_ok=True)
    partial = stored.with_suffix(f".{os.getpid()}.tmp")
    partial.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(partial)) as database:
        _fill(database, blobs, summaries, directory)
        database.commit()
    partial.replace(stored)
    return _in_use(digest, directory)


def _in_use(digest: str, directory: Path) -> CallIndex:
    """The stored index `digest`, noted as used now, as is its scan fingerprint's directory. What
    no run has used for STALE_DAYS goes: other fingerprints' directories, other trees' indexes
    (one per base checked or tree linted, 130-160 MB for a kernel) and partial ones a killed build
    left behind. The scans stay (shared by blob id; a new base rescans only its changed files)."""
    from patchbench.checks import facts
    facts.retire_other_versions(directory)
    stored = directory / f"{digest}.sqlite"
    try:
        os.utime(stored)
        entries = list(directory.iterdir())
    except OSError:
        entries = []   # a read-only cache: nothing is noted or removed
    for entry in entries:
        if entry != stored and entry.suffix in (".sqlite", ".tmp") and facts.unused(entry):
            try:
                entry.unlink()
            except OSError:
                pass   # another run removed it first, or the cache is not ours to change
    return CallIndex(digest, directory)


def _fill(database: sqlite3.Connection, blobs: list[tuple[str, str]], summaries: list[dict],
          directory: Path) -> None:
    database.executescript("""
        CREATE TABLE files (number INTEGER PRIMARY KEY, path TEXT, blob TEXT);
        CREATE TABLE defs (name TEXT, file INTEGER, global INTEGER, stated INTEGER);
        CREATE TABLE callers (name TEXT, file INTEGER);
        CREATE TABLE regs (name TEXT, file INTEGER, kind TEXT, struct TEXT);
        CREATE TABLE wrappers (name TEXT PRIMARY KEY, effect TEXT);
        CREATE TABLE needs (name TEXT, file INTEGER, primitive TEXT, origin INTEGER, line INTEGER,
                            via TEXT);
        CREATE TABLE queue_wrappers (name TEXT PRIMARY KEY, effect TEXT);
        CREATE TABLE c_wrappers (name TEXT PRIMARY KEY, effect TEXT);
        CREATE TABLE guards (name TEXT PRIMARY KEY, effect TEXT);
    """)
    database.executemany("INSERT INTO needs VALUES (?, ?, ?, ?, ?, ?)",
                         _needs(blobs, summaries, directory))
    database.executemany("INSERT INTO files VALUES (?, ?, ?)",
                         ((number, path, blob) for number, (path, blob) in enumerate(blobs)))
    defined: set[str] = set()
    wrappers: dict[str, str] = {}
    # global lock wrappers of .c files (ovs_lock() around mutex_lock(&ovs_mutex)): name -> effect,
    # None when two global definitions differ
    c_wrappers: dict[str, str | None] = {}
    queue_wrappers: dict[str, str] = {}
    # guard classes (DEFINE_GUARD): name -> [spelling, arguments], None when two definitions differ
    guards: dict[str, str | None] = {}
    for number, ((path, _), found) in enumerate(zip(blobs, summaries)):
        for name, effect in found["guards"].items():
            effect = json.dumps(effect)
            guards[name] = effect if guards.get(name, effect) == effect else None
        header = path.endswith(".h")
        if header:
            for name, effect in found["queue"].items():
                queue_wrappers.setdefault(name, json.dumps(effect))
        rows = []
        for name, (is_global, stated, *wrapper) in found["defs"].items():
            rows.append((name, number, int(is_global or header), stated))
            if header and wrapper:
                wrappers.setdefault(name, json.dumps(wrapper[0]))
            elif is_global and not header:
                effect = json.dumps(wrapper[0]) if wrapper else None
                c_wrappers[name] = effect if c_wrappers.get(name, effect) == effect else None
        defined.update(name for name, *_ in rows)
        database.executemany("INSERT INTO defs VALUES (?, ?, ?, ?)", rows)
        database.executemany("INSERT INTO regs VALUES (?, ?, ?, ?)",
                             ((function, number, kind, struct) for function, kind, struct in found["regs"]))
    # calls of names never defined (macros, functions of unindexed files) lead nowhere
    for number, found in enumerate(summaries):
        database.executemany("INSERT INTO callers VALUES (?, ?)",
                             ((name, number) for name in found["called"] if name in defined))
    database.executemany("INSERT INTO wrappers VALUES (?, ?)", sorted(wrappers.items()))
    database.executemany("INSERT INTO queue_wrappers VALUES (?, ?)", sorted(queue_wrappers.items()))
    database.executemany("INSERT INTO guards VALUES (?, ?)",
                         sorted((name, effect) for name, effect in guards.items() if effect))
    database.executemany("INSERT INTO c_wrappers VALUES (?, ?)",
                         sorted((name, effect) for name, effect in c_wrappers.items() if effect))
    database.executescript("""
        CREATE INDEX defs_name ON defs (name);
        CREATE INDEX callers_name ON callers (name);
        CREATE INDEX regs_name ON regs (name);
        CREATE INDEX files_path ON files (path);
        CREATE INDEX needs_name ON needs (name);
    """)


def _needs(blobs: list[tuple[str, str]], summaries: list[dict], directory: Path) -> list[tuple]:
    """(name, file, primitive, file of the read, its line, callee it is reached through or "") of
    every function that needs an RCU read-side section on entry: it reads with nothing of its own
    held (the scan's "reads"), or calls such a function with nothing held (no reader, RTNL or named
    lock), up to NEED_DEPTH calls away. A global name passes its need on only when every global
    definition of it needs one (an #ifdef stub that reads nothing does not). A call through an ops
    field (`dev->netdev_ops->ndo_fill_forward_path(...)`) calls whichever function is registered
    in it: it passes on the need of any of them, for a field registered in initialisers of one
    struct type only and named like no function (ndo_*, not .open or .show)."""
    definitions: dict[str, list[tuple[int, bool]]] = {}
    callers: dict[str, list[int]] = {}
    registered: dict[str, set] = {}   # field -> {(file, function), ...}; "" when not an ops field
    for number, ((path, _), found) in enumerate(zip(blobs, summaries)):
        for name, (is_global, *_) in found["defs"].items():
            definitions.setdefault(name, []).append((number, bool(is_global) or path.endswith(".h")))
        for name in found["called"]:
            callers.setdefault(name, []).append(number)
    structs: dict[str, set] = {}
    for number, found in enumerate(summaries):
        for function, field, struct in found["regs"]:
            structs.setdefault(field, set()).add(struct)
            registered.setdefault(field, set()).add((number, function))
    fields_of: dict[str, list[tuple[str, int]]] = {}   # function -> [(ops field, registering file)]
    for field in sorted(registered):
        if field not in definitions and len(structs[field]) == 1 and "" not in structs[field]:
            for number, function in sorted(registered[field]):
                fields_of.setdefault(function, []).append((field, number))
    needs = {(number, name): (primitive, number, line, "")
             for number, found in enumerate(summaries) for name, (primitive, line) in found["reads"].items()}
    frontier = sorted(needs)
    scans: dict[int, dict] = {}
    passed: set[str] = set()   # ops fields whose need is passed on already
    for _ in range(NEED_DEPTH):
        found_now: dict[tuple[int, str], tuple] = {}
        for number, name in frontier:
            is_global = (number, True) in definitions[name]
            ways = []   # (the word its callers call, their files)
            if not is_global:
                ways.append((name, [number]))
            elif all((n, name) in needs for n, g in definitions[name] if g):
                own = {n for n, g in definitions[name] if not g}   # their calls are of their own static
                ways.append((name, [n for n in callers.get(name, ()) if n not in own]))
            for field, registering in fields_of.get(name, ()):
                if field not in passed and (is_global or registering == number):
                    passed.add(field)
                    ways.append((field, callers.get(field, [])))
            primitive, origin, line, _ = needs[(number, name)]
            for word, files in ways:
                for caller_file in files:
                    if caller_file not in scans:
                        scans[caller_file] = _load_scan(directory, blobs[caller_file][1]) or {"calls": {}}
                    for caller, called in scans[caller_file]["calls"].items():
                        key = (caller_file, caller)
                        if key not in needs and key not in found_now and [word, 0] in called:
                            found_now[key] = (primitive, origin, line, word)
        needs.update(found_now)
        frontier = sorted(found_now)
    return sorted((name, number, *need) for (number, name), need in needs.items())


def from_files(root: Path, jobs: int) -> CallIndex:
    """The index of the C files and headers of a kernel work tree."""
    blobs = _checkout_blobs(root)
    return _build(_walked_blobs(root) if blobs is None else blobs, ("files", root), jobs)


def _walked_blobs(root: Path) -> list[tuple[str, str]]:
    """(path, blob id) of every indexed file under root, each read and hashed."""
    from patchbench.checks.facts import blob_id
    blobs = []
    for directory, subdirectories, files in os.walk(root):
        relative = os.path.relpath(directory, root)
        relative = "" if relative == "." else relative + "/"
        subdirectories[:] = sorted(d for d in subdirectories
                                   if not d.startswith(".") and indexed(f"{relative}{d}/x.c"))
        for name in files:
            if indexed(relative + name):
                try:
                    blobs.append((relative + name, blob_id((root / relative / name).read_bytes())))
                except OSError:
                    continue
    return blobs


def _checkout_blobs(root: Path) -> list[tuple[str, str]] | None:
    """What _walked_blobs(root) gives, when root is the top of a git checkout, from git's index:
    a file its stat data shows unchanged has the blob id recorded there (reading and hashing a
    whole tree costs about 1.5 CPU-s, this a fifth of it). Changed, unmerged and untracked files
    and symlinks (git records the link, the walk reads its target) are hashed as the walk does.
    None when root is no checkout's top (or git cannot say)."""
    from patchbench.checks.facts import blob_id
    git = Git.at(root)
    try:
        code, top, _ = git.run("rev-parse", "--show-toplevel", check=False)
        if code != 0 or Path(top.strip()).resolve() != root.resolve():
            return None
        # git keeps only what indexed() would (a third of a kernel's 95 000 paths are neither .c
        # nor .h); the two that stat or walk the whole tree run while the index listing is read
        def listing(*command: str) -> str:
            return git.run(*command, "-z", "--", *_PATHSPEC, env=_GLOBBING)[1]

        with ThreadPoolExecutor(max_workers=2) as pool:
            changed = pool.submit(listing, "diff-files", "--name-only")
            untracked = pool.submit(listing, "ls-files", "--others")
            staged, hashed = _staged(listing("ls-files", "--stage"))
            others = changed.result().split("\0") + untracked.result().split("\0")
    except (OSError, GitFailed):   # no git installed, a repository git refuses: read every file
        return None
    hashed.update(path for path in others if _walked(path))
    for path in hashed:
        staged.pop(path, None)
        try:
            staged[path] = blob_id((root / path).read_bytes())
        except OSError:
            continue   # deleted, or a directory (a symlink to one, a submodule)
    return list(staged.items())


def _staged(listed: str) -> tuple[dict[str, str], set[str]]:
    """From `git ls-files --stage -z`: path -> blob id of the regular files _walked() keeps, and
    the kept paths git's blob id is not the file's content for."""
    staged: dict[str, str] = {}
    hashed: set[str] = set()
    for entry in listed.split("\0"):
        meta, _, path = entry.partition("\t")
        mode, blob, stage = (meta.split() + ["", "", ""])[:3]
        if not _walked(path):
            continue
        if mode in ("100644", "100755") and stage == "0":
            staged[path] = blob
        else:
            hashed.add(path)   # a symlink, a conflict, a submodule
    return staged, hashed


# indexed() as git pathspecs ("*" matches "/" too); _walked() still decides
_PATHSPEC = (*(f"*{suffix}" for suffix in SUFFIXES), *(f":(exclude){top}" for top in SKIPPED_DIRS))
_GLOBBING = {"GIT_LITERAL_PATHSPECS": "0"}   # the runner's default is literal


def _walked(path: str) -> bool:
    """_walked_blobs lists path: indexed, and under no directory named .*"""
    return indexed(path) and not any(part.startswith(".") for part in path.split("/")[:-1])


def from_git(git_dir: Path, rev: str, jobs: int) -> CallIndex:
    """The index of the C files and headers of `rev` in a repository (blobs read from git).

    The digest of a git tree seen before is looked up by its tree id (one rev-parse instead of
    listing and hashing 80 000 paths: most of opening the index for a `check`)."""
    git = Git(git_dir)
    tree = git.out("rev-parse", "--verify", "--end-of-options", rev + "^{tree}")
    known = _tree_digest_path(tree)
    try:
        digest = known.read_text().strip()
        if (known.parent.parent / f"{digest}.sqlite").is_file():
            return _in_use(digest, known.parent.parent)
    except OSError:
        pass
    blobs = []
    for line in git.out("ls-tree", "-r", "--full-tree", tree).splitlines():
        meta, _, path = line.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "blob" and indexed(path):
            blobs.append((path, parts[2]))
    index = _build(blobs, ("git", git_dir), jobs)
    try:
        known.parent.mkdir(parents=True, exist_ok=True)
        partial = known.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(index.digest)
        partial.replace(known)
    except OSError:
        pass   # a read-only cache only costs time
    return index


def _tree_digest_path(tree: str) -> Path:
    """Where the digest of git tree `tree`'s index is noted; the key includes what indexed()
    keeps, so a change of that never reads a stale digest."""
    key = hashlib.sha1(f"{tree} {SUFFIXES} {SKIPPED_DIRS}".encode()).hexdigest()
    return cache_dir() / "trees" / key
