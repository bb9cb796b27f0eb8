"""The scan of one file: a lexical pass over a C file or header (no parse) that records its
definitions, calls and what each call holds, registrations, RCU reads with nothing held, lock and
tx-queue wrappers, guard classes and local includes.
"""

from __future__ import annotations

import re
from functools import lru_cache

from patchbench.checks.kernel import facts as kfacts


# Bump when scan() changes what it records: every stored scan and index is then rebuilt.
SCAN_VERSION = 21


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
# `#define FOO_TXQ_NUM 1`, `#define BAR (4U)`: a name for a plain integer (comments already blanked)
_INTEGER_DEFINE = re.compile(rb'^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+\(?[ \t]*(\d+)[uUlL]*[ \t]*\)?[ \t]*$', re.M)


_MUST_HOLD_RCU = re.compile(rb"__must_hold\s*\(\s*RCU\s*\)|__releases\s*\(\s*RCU\s*\)")


# cleanup.h guard classes: DEFINE_GUARD(name, type, lock, unlock) holds the lock expression with
# _T the guarded pointer; DEFINE_LOCK_GUARD_1(name, type, lock, unlock, ...) with _T->lock it
_GUARD_DEFINITION = re.compile(rb"^[ \t]*(DEFINE_GUARD|DEFINE_LOCK_GUARD_1)\s*\(", re.M)


_GUARD_PLACEHOLDER = {b"DEFINE_GUARD": r"\b_T\b", b"DEFINE_LOCK_GUARD_1": r"\b_T->lock\b"}


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
    "queue": {name: [params, [[spelling, argument], ...]]}, "acquires": {name: [params, [[spelling,
    argument], ...]]}, ...} of one file's text; "reads" has the functions that read an RCU-protected
    pointer with nothing of their own held (no reader, RTNL or named lock before it, no lockdep
    condition): the first such read; "queue" the functions calling a tx queue stop/wake/start
    spelling; "acquires" the functions taking a lock on every path and releasing it again
    (_own_takes): a caller already holding it deadlocks there."""
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
    acquires: dict[str, list] = {}
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
        lock_at = 0
        unconditional: set[int] = set()   # indexes into taken of the calls made on every path
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
                found_at = _call_pattern(word).search(body, lock_at)
                if found_at is not None:
                    lock_at = found_at.end()
                    if _statement_of_body(body, found_at.start()) or \
                            (word in _failing_spellings() and _failure_leaves(body, found_at.start(), found_at.end())):
                        unconditional.add(len(taken))
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
        taking = _own_takes(taken, unconditional)
        if taking:
            acquires[name] = [_params(text, start), taking]
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
    for macro, (word, offset) in _macro_reads(text, reads_needing).items():
        if macro not in defs:   # a function of that name is what the scan read
            lines = lines or _Lines(source)
            defs[macro] = [False, 0]
            reads[macro] = [word.decode(), lines.of(text, offset)]
    for macro, wrapper in _macro_locks(text).items():
        if macro not in defs:   # a lock wrapper written as a macro (`#define hci_dev_lock(d) mutex_lock(&d->lock)`)
            defs[macro] = [False, 0, wrapper]
    fields, accessors = field_reads(text, bodies)
    return {"defs": defs, "calls": calls, "regs": regs, "reads": reads, "queue": queue, "acquires": acquires,
            "guards": guard_classes(text),
            "includes": local_includes(source), "fields": fields, "accessors": accessors,
            "integers": integer_defines(text)}


# A function-like macro: `#define name(params) body`, its continued lines included.
_MACRO = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)\(([^)\n]*)\)((?:[^\n]*\\\n)*[^\n]*)", re.M)


def _macro_reads(text: bytes, reads_needing: dict[bytes, int | None]) -> dict[str, tuple[bytes, int]]:
    """{macro: (primitive, offset of the read in text)} of the function-like macros whose body reads
    an RCU-protected pointer with nothing of its own held, as a function body does for "reads": a
    subsystem's for-each macro over an RCU list (`list_for_each_entry_rcu(pos, &(p)->list, node)`
    with no lockdep condition), an accessor around rcu_dereference(). Its callers need a section as
    a function's do. Not a macro that takes or asserts a lock or reader itself, one with variadic
    parameters (it may pass its caller's lockdep condition on), nor one spelled like a primitive
    of the facts table (those are judged by their own entries)."""
    if b"define" not in text:
        return {}
    found = {}
    for match in _MACRO.finditer(text):
        name, params, body = match.group(1), match.group(2), match.group(3)
        if b"..." in params or name in reads_needing or name in _fact_spellings():
            continue
        words = _CALL.findall(body)
        if not any(word in reads_needing for word in words) or \
                any(word in _fact_spellings() for word in words if word not in reads_needing):
            continue
        for call in _CALL.finditer(body):
            word = call.group(1)
            condition = reads_needing.get(word, -1)
            if condition != -1 and (condition is None or
                                    len(_arguments(body.replace(b"\\\n", b"  "), call.end())) <= condition):
                found[name.decode("latin-1")] = (word, match.start(3) + call.start())
                break
    return found


def _macro_locks(text: bytes) -> dict[str, list]:
    """{macro: [params, effect]} of the function-like macros whose body is nothing but lock calls
    of the facts table (`do { ... } while (0)` allowed) that leave a lock taken or released, as a
    wrapper function's body does (_net_effect): `#define hci_dev_lock(d) mutex_lock(&d->lock)`.
    Not a macro spelled like a facts-table entry (judged by its own), nor a variadic one."""
    if b"define" not in text:
        return {}
    found = {}
    spellings = _lock_spellings()
    for match in _MACRO.finditer(text):
        name, params, body = match.group(1), match.group(2), match.group(3).replace(b"\\\n", b"  ")
        if b"..." in params or name in _fact_spellings():
            continue
        calls = list(_CALL.finditer(body))
        if not calls or any(call.group(1) not in spellings and call.group(1) not in _NOT_NAMES for call in calls):
            continue
        taken = []
        for call in calls:
            if call.group(1) in spellings:
                arguments = _arguments(body, call.end())
                taken.append([call.group(1).decode(), arguments[0].decode("latin-1") if arguments else ""])
        effect = _net_effect(taken)
        if effect:
            found[name.decode("latin-1")] = [[p.strip().decode("latin-1") for p in params.split(b",") if p.strip()],
                                             effect]
    return found


@lru_cache(maxsize=1)
def _fact_spellings() -> frozenset[bytes]:
    """Every lock, reader, assert and dereference spelling of the facts table."""
    return frozenset(name.encode() for name in kfacts.lock_ops()) | \
        frozenset(name.encode() for name in kfacts.dereferences()) | _named_locks() | _rtnl_asserts()


def integer_defines(text: bytes, blanked: bool = True) -> dict[str, int]:
    """{name: value} of the macros the text defines as a plain decimal integer (`blanked`: its
    comments and strings are blanked already); a name defined twice with different values (under
    #if) is left out."""
    if b"define" not in text:
        return {}
    if not blanked:
        text = _COMMENT_OR_STRING.sub(b" ", text)
    found: dict[str, int] = {}
    for name, value in _INTEGER_DEFINE.findall(text):
        key = name.decode("latin-1")
        found[key] = int(value) if found.get(key, int(value)) == int(value) else -1
    return {name: value for name, value in found.items() if value >= 0}


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


# -- the NULL belief of RCU-protected fields (analyses/rcu/nullness.py reads the checked file itself;
# this is the rest of the tree's share, read lexically) -------------------------------------------

_PATH = rb"[A-Za-z_]\w*(?:\s*(?:->|\.)\s*[A-Za-z_]\w*|\s*\[[^\]\[]*\])*\s*(?:->|\.)\s*[A-Za-z_]\w*"


@lru_cache(maxsize=1)
def _belief_patterns() -> tuple[re.Pattern, re.Pattern, re.Pattern, frozenset[bytes]]:
    """(a load of a field, a NULL store by an [rcu].assign spelling, a plain NULL store of a
    field, the calls passing on a truth), from the facts table."""
    loads = b"|".join(sorted(re.escape(n.encode()) for n in kfacts.pointer_loads()))
    stores, value_at, tests = kfacts.null_belief()
    assigns = b"|".join(sorted(re.escape(n.encode()) for n in stores))
    load = re.compile(rb"\b(" + loads + rb")\s*\(\s*&?\s*(" + _PATH + rb")\s*[,)]")
    store = re.compile(rb"\b(?:" + assigns + rb")\s*\(\s*(" + _PATH + rb")\s*," +
                       rb"(?:[^,()]*,){" + str(value_at - 1).encode() + rb"}\s*NULL\s*[,)]")
    plain = re.compile(rb"(?<![\w>.])(" + _PATH + rb")\s*=\s*NULL\s*;")
    return load, store, plain, frozenset(t.encode() for t in tests)


@lru_cache(maxsize=1)
def _belief_words() -> tuple[bytes, ...]:
    """Words one of which a text with a load or an [rcu].assign spelling contains."""
    return (b"_dereference", *sorted(n.encode() for n in kfacts.null_belief()[0]))


_TESTED_BEFORE = re.compile(rb"(?:!|&&|\|\||\bif\s*\(|\bwhile\s*\(|\?)\s*\(*\s*$")
_TESTED_AFTER = re.compile(rb"\s*(?:&&|\|\||\?|[!=]=\s*NULL\b)")
_ASSIGNED_TO = re.compile(rb"(?<![\w>.])([A-Za-z_]\w*)\s*=\s*$")
_RETURNED = re.compile(rb"\breturn\s*$")


def field_reads(text: bytes, bodies: list[tuple[str, int, int]]) -> tuple[dict[str, list], dict[str, str]]:
    """{field key: [functions storing NULL in it, functions testing a load of it, loads of it
    dereferenced untested]} and {function that merely returns a read-side load: field key} of a file's
    comment-blanked text, lexically. A field key is "type.member" by the root variable's declared
    struct type (FileModel.canonical's form); see analyses/rcu/nullness.py for the kinds of read.
    Only texts naming a load or an [rcu].assign spelling are read."""
    load, store, plain, tests = _belief_patterns()
    if not any(word in text for word in _belief_words()):
        return {}, {}
    fields: dict[str, list] = {}
    accessors: dict[str, str] = {}
    for name, start, end in bodies:
        body = text[start:end]
        header = _own_header(text, start)
        types: dict[bytes, str | None] = {}
        loaded = False
        for match in load.finditer(body):
            key = _field_key(match.group(2), header, body, types)
            if key is None:
                continue
            loaded = True
            kind = _lexical_use(body, match.start(), match.end() - 1, tests)
            if kind == "returned" and body[:match.start()].strip(b" \t\n{") == b"return" and \
                    match.group(1).decode() in kfacts.read_side_loads():
                accessors[name] = key
            entry = fields.setdefault(key, [[], [], 0])
            if kind == "tested":
                entry[1].append(name)
            elif kind == "unchecked":
                entry[2] += 1
        for pattern in (store, plain) if loaded or b"NULL" in body else ():
            for match in pattern.finditer(body):
                key = _field_key(match.group(1), header, body, types)
                if key is not None:
                    entry = fields.setdefault(key, [[], [], 0])
                    if name not in entry[0]:
                        entry[0].append(name)
    return fields, accessors


def _own_header(text: bytes, brace: int) -> bytes:
    """The text of the definition before its body's `{`, from where the previous one ended."""
    window = text[max(0, brace - 400):brace]
    cut = max(window.rfind(b";\n"), window.rfind(b"}\n"), window.rfind(b"\n\n"))
    return window[cut + 2:] if cut >= 0 else window[window.find(b"\n") + 1:]


def _field_key(path: bytes, header: bytes, body: bytes, types: dict[bytes, str | None]) -> str | None:
    """"type.member" for an access path whose root's struct type the function declares."""
    squeezed = b"".join(path.split())
    root = re.match(rb"[A-Za-z_]\w*", squeezed).group()
    if root not in types:
        declared = re.compile(rb"(?:\bstruct\s+)?\b([A-Za-z_]\w*)\s*\*+\s*(?:const\s+)?" + root +
                              rb"\s*[,;)=\[]")
        found = declared.search(header) or declared.search(body)
        word = found.group(1) if found else None
        types[root] = word.decode("latin-1") if word and word not in _NOT_TYPES else None
    if types[root] is None:
        return None
    rest = re.sub(rb"\[[^\]]*\]", b"[]", squeezed[len(root):]).replace(b"->", b".")
    return types[root] + rest.decode("latin-1")


_NOT_TYPES = frozenset({b"return", b"sizeof", b"else", b"case", b"goto", b"const"})


def _lexical_use(body: bytes, start: int, close: int, tests: frozenset[bytes]) -> str:
    """tested | unchecked | returned | other: how the load spanning start..close (its `)`) of the
    body is used, or the local it is assigned to first."""
    before = body[max(0, start - 80):start]
    after = body[close + 1:close + 40]
    if re.match(rb"\s*->", after):
        return "unchecked"
    if _TESTED_BEFORE.search(before) or _TESTED_AFTER.match(after):
        return "tested"
    if _RETURNED.search(before):
        return "returned"
    assigned = _ASSIGNED_TO.search(before)
    if assigned is None or not re.match(rb"\s*;", after):
        return "other"
    variable = re.escape(assigned.group(1))
    use = re.compile(rb"(?<!->)(?<!\.)\b" + variable + rb"\b").search(body, close + 1)
    if use is None:
        return "other"
    before, after = body[max(0, use.start() - 80):use.start()], body[use.end():use.end() + 40]
    if re.match(rb"\s*(?:->|\[)", after) or re.search(rb"(?:^|[=(,;{}]|\breturn)\s*\*\s*$", before):
        return "unchecked"
    if _TESTED_BEFORE.search(before) or _TESTED_AFTER.match(after) or \
            re.search(rb"(?:NULL\s*[!=]=)\s*$", before):
        return "tested"
    wrapper = re.search(rb"\b(\w+)\s*\(\s*$", before)
    if wrapper is not None and wrapper.group(1) in tests and re.match(rb"\s*[,)]", after):
        return "tested"
    return "other"


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
    facts table: rcu_dereference*, srcu_dereference, list_first_or_null_rcu and the list walks
    given no lockdep condition, and the forms RTNL also satisfies (rcu_dereference_rtnl(): a
    caller holding neither needs one; judged by `check` only, see TreeContext.need). Not
    _protected. A walk accepts the update-side
    lock as well as a reader, but a need is passed only to callers holding neither a reader, RTNL
    nor any named lock at the call, and judged where the chain's entry is known. The list
    accessors and walks are reads the update-side lock satisfies only where the analysis sees it
    held (an ndo_* op that reads with one and nothing held passes its need to the callers of the
    core function that calls the op)."""
    readers = kfacts.readers()
    return {name.encode(): need.condition_arg for name, need in kfacts.dereferences().items()
            if need.strict & readers}


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


def _own_takes(taken: list[list[str]], unconditional: set[int]) -> list[list[str]]:
    """[spelling, argument text] of each lock a body takes before doing anything else to it, with
    a blocking spelling (not a trylock), in a statement of the body itself (not under a condition
    or in a loop: every path that goes on takes it), and releases again (not a wrapper handing it
    to its caller): the locks the function acquires for itself, which its caller must not hold."""
    first: dict[tuple[str, str], int] = {}
    released: set[tuple[str, str]] = set()
    for number, (spelling, argument) in enumerate(taken):
        op = kfacts.lock_op(spelling)
        lock = (op.kind, "".join(argument.split()))
        first.setdefault(lock, number)
        if op.action == "release":
            released.add(lock)
    return [[taken[number][0], lock[1]] for lock, number in first.items()
            if lock in released and number in unconditional and kfacts.lock_op(taken[number][0]).action != "release"]


@lru_cache(maxsize=256)
def _call_pattern(word: bytes) -> re.Pattern:
    return re.compile(rb"\b" + re.escape(word) + rb"\s*\(")


_STATEMENT_START = frozenset(b";{}:")


def _statement_of_body(body: bytes, at: int) -> bool:
    """The call at `at` of a body (text from its `{`) starts a statement of the body itself, or is
    the value assigned by one (`err = mutex_lock_interruptible(...)`): not nested in a block, nor
    the single statement of an `if`/`else`/loop without braces."""
    if body.count(b"{", 0, at) - body.count(b"}", 0, at) != 1:
        return False
    before = body[max(0, at - 80):at].rstrip()
    if before.endswith(b"="):
        before = re.sub(rb"[A-Za-z_]\w*\s*=$", b"", before).rstrip()
    return bool(before) and before[-1] in _STATEMENT_START


@lru_cache(maxsize=1)
def _failing_spellings() -> frozenset[bytes]:
    """Blocking spellings that may fail instead (mutex_lock_interruptible(), rtnl_lock_killable())."""
    return frozenset(name.encode() for name, op in kfacts.lock_ops().items() if op.action == "try_fail")


_LEAVES = re.compile(rb"\s*\)\s*(?:\{\s*)?(?:return|goto)\b")


def _failure_leaves(body: bytes, at: int, open_at: int) -> bool:
    """The call at `at` (its `(` ending at open_at) is the whole condition of an `if` of the body
    itself whose branch leaves (`if (rtnl_lock_killable()) return -EINTR;`): every path that goes
    on past it holds the lock."""
    if body.count(b"{", 0, at) - body.count(b"}", 0, at) != 1 or \
            not re.search(rb"\bif\s*\(\s*$", body[max(0, at - 20):at]):
        return False
    depth, end = 1, open_at
    while depth and end < len(body):
        depth += (body[end:end + 1] == b"(") - (body[end:end + 1] == b")")
        end += 1
    return bool(_LEAVES.match(body, end))


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


_SECTION_BITS = _BIT["rcu"] | _BIT["rcu_bh"] | _BIT["rcu_sched"] | _BIT["srcu"]


def _families(bits: int) -> frozenset:
    return frozenset(family for family, bit in _BIT.items() if bits & bit)


def _context_families(context: kfacts.Context) -> frozenset:
    return context.readers | (frozenset({"rtnl"}) if "rtnl" in context.locks else frozenset())
