"""Whether an RCU-protected field may be NULL, as the code itself believes it, and the reads that
dereference it without a test (rule rcu-deref-null-unchecked).

A **read** is a load of a field by a primitive that returns its pointer (`rcu_dereference(q->owner)`,
`rtnl_dereference()`, `*_protected()`: kfacts.pointer_loads(); never rcu_access_pointer()), or a call of
an accessor that merely returns such a load (of this file, or of another file or header through the
call index). The field is named by its access path with the root's struct type
(`FileModel.canonical`: "demo_queue.owner"); a root of unknown type is no field. A read's value is
followed to its first use on the way out of the load, in source order:

- **tested**: the value (or the local holding it) is first read as a truth value: `!p`, `p && ...`,
  `p ? ... : ...`, `if (p)`, `while (p)`, `p == NULL` / `p != NULL`, or inside a call that passes on
  or tests its truth (`WARN_ON(!p)`, `likely(p)`, `IS_ERR_OR_NULL(p)`: the facts table's
  [rcu.nullness] tests);
- **unchecked**: it is first dereferenced (`rcu_dereference(q->owner)->dev`, `p->x`, `*p`, `p[i]`);
- **other**: anything else (passed to a call, stored, returned, reassigned first): unknown, and
  neither kind of reader. A use in source order comes first on every path that reaches both
  except round a loop, where the read is before the loop on its first iteration anyway.

A **NULL store** is `RCU_INIT_POINTER(x->f, NULL)`, `rcu_assign_pointer(x->f, NULL)`,
`rcu_replace_pointer(x->f, NULL, c)` ([rcu].assign) or a plain `x->f = NULL;` of a field some
primitive loads (sparse only accepts those loads of an `__rcu` field).

Only a read that may race with the update storing NULL is reported (_racing): a load by a
primitive only a reader satisfies (`rcu_dereference()`, `_bh`, `_sched`, `srcu_dereference()`:
kfacts.racing_loads()) or an accessor around a read-side load, in a function some way into which
has not loaded the field before. An update-side load (`rtnl_dereference()`,
`rcu_dereference_protected()`) or one naming the update side as an alternative (`_check(p, cond)`,
`_rtnl`) may run serialised with the stores by their lock, where the code knows the state it is
in (just attached, checked by the caller); a static function whose every in-file caller loaded the
field before the call re-reads what its caller judged. Their tests and dereferences still count as
evidence.

The **belief**: the field may be NULL where the code stores NULL in it and, among the *other* reads
of the field (this file's and, through the call index, the rest of the tree's, read lexically), at
least MIN_TESTED test it and they are at least MIN_SHARE of the tested and unchecked ones. An
unchecked read of such a field is a verdict: `same_file` when this file alone holds the belief
(its own NULL store and its own readers), `tree` when it rests on other files too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import tree_sitter

from patchbench.checks.engine import parse as cparse
from patchbench.checks.engine.model import FileModel, Function, squeeze
from patchbench.checks.kernel import facts as kfacts

MIN_TESTED = 2       # other reads that test the field for NULL, at least
MIN_SHARE = 0.75     # of the other reads that test or dereference it, the share that test it

_NULL = frozenset({"NULL", "0", "((void*)0)"})
_TRANSPARENT = frozenset({"parenthesized_expression", "cast_expression"})
_CONDITIONS = frozenset({"if_statement", "while_statement", "do_statement", "for_statement"})
_FIELD_PATH = re.compile(r"^&?\(?[A-Za-z_]\w*(?:(?:->|\.)[A-Za-z_]\w*|\[[^\]]*\])*(?:->|\.)[A-Za-z_]\w*\)?$")
_EXPRESSION_SHOWN = 72


@dataclass(eq=False)
class Read:
    """One read of an RCU-protected field: where, its kind (tested | unchecked | other | returned),
    and for an unchecked one the dereference."""
    function: str
    key: str
    primitive: str
    node: tree_sitter.Node
    kind: str
    use: tree_sitter.Node | None = None


@dataclass
class Field:
    """What one file says of one field: its reads and the functions storing NULL in it (in order)."""
    reads: list[Read] = field(default_factory=list)
    nulls: list[tuple[str, int]] = field(default_factory=list)   # (function, line)


@dataclass(frozen=True)
class Verdict:
    read: Read
    kind: str                    # same_file | tree
    store: str                   # a function storing NULL
    store_file: str              # "" when in this file
    reader: str                  # a function testing the field
    reader_line: int             # its line when in this file, else 0
    reader_file: str             # "" when in this file
    tested: int                  # other reads testing it
    unchecked: int               # other reads dereferencing it untested
    stores: int


def fields(model: FileModel) -> dict[str, Field]:
    """The file's reads and NULL stores, by field key (computed once per file)."""
    return model.memo("nullness.fields", lambda: _fields(model))


def verdicts(model: FileModel) -> list[Verdict]:
    """The unchecked reads of fields the code believes may be NULL (see the module)."""
    return model.memo("nullness.verdicts", lambda: _verdicts(model))


def _verdicts(model: FileModel) -> list[Verdict]:
    found = []
    by_key = fields(model)
    for key, here in sorted(by_key.items()):
        unchecked = [r for r in here.reads if r.kind == "unchecked"]
        starts = _read_starts(here)
        racing = [r for r in unchecked if _racing(model, r, starts)]
        if not racing:
            continue
        tested = [r for r in here.reads if r.kind == "tested"]
        nulls = here.nulls
        # one belief for every unchecked read of the field: the others are its other reads
        own = _holds(len(tested), len(unchecked) - 1) and bool(nulls)
        elsewhere = model.context.field_beliefs(model.path, key)
        total_tested = len(tested) + elsewhere.tested_count
        total_unchecked = len(unchecked) - 1 + elsewhere.unchecked
        if not own and not (_holds(total_tested, total_unchecked) and (nulls or elsewhere.nulls)):
            continue
        store, store_file = (nulls[0][0], "") if nulls else elsewhere.nulls[0]
        for read in racing:
            if tested:
                reader = min(tested, key=lambda r: r.node.start_byte)
                reader_name, reader_line, reader_file = reader.function, reader.node.start_point[0] + 1, ""
            else:
                reader_name, reader_file = elsewhere.tested[0]
                reader_line = 0
            found.append(Verdict(read, "same_file" if own else "tree", store, store_file, reader_name,
                                 reader_line, reader_file, total_tested, total_unchecked,
                                 len(nulls) + len(elsewhere.nulls)))
    return found


def _read_starts(here: Field) -> dict[str, list[int]]:
    """function -> the start bytes of its reads of the field."""
    starts: dict[str, list[int]] = {}
    for read in here.reads:
        starts.setdefault(read.function, []).append(read.node.start_byte)
    return starts


def _racing(model: FileModel, read: Read, earlier: dict[str, list[int]]) -> bool:
    """Whether an unchecked read may race with a NULL store unseen by its function: a load by a
    reader-only primitive (kfacts.racing_loads(), or an accessor), in a function that some way in
    reaches without having read the field first (a static function whose every caller in the file
    loaded the field before calling it re-reads what its caller judged)."""
    loads = kfacts.pointer_loads()
    if read.primitive in loads and read.primitive not in kfacts.racing_loads():
        return False
    calls = model.callers.get(read.function, [])
    if not calls or model.has_unknown_callers(read.function):
        return True
    return not all(any(start < call.start for start in earlier.get(call.function, ())) for call in calls)


def _holds(tested: int, unchecked: int) -> bool:
    return tested >= MIN_TESTED and tested >= MIN_SHARE * (tested + unchecked)


def expression(model: FileModel, read: Read) -> str:
    """The dereference as the code spells it, whitespace squeezed, cut short when long."""
    node = read.use if read.use is not None else read.node
    text = squeeze(model.text(node))
    return text if len(text) <= _EXPRESSION_SHOWN else text[:_EXPRESSION_SHOWN - 3] + "..."


# -- reading one file --------------------------------------------------------------------------

def _fields(model: FileModel) -> dict[str, Field]:
    loads = kfacts.pointer_loads()
    stores, value_at, tests = kfacts.null_belief()
    found: dict[str, Field] = {}
    accessors = _accessors(model, loads, tests)
    for function in model.functions.values():
        for call in function.calls:
            # an accessor of another file or header, asked of the index once per call
            outside = None if call.name in loads or call.name in accessors or call.name in model.functions \
                else model.context.accessor(call.name)
            if call.name in loads or call.name in accessors or outside is not None:
                if call.name in loads:
                    key = _key(model, function, call.args[0]) if call.args else None
                else:
                    key = accessors.get(call.name, outside)
                if not key:
                    continue
                kind, use = _classify(model, function, call.node, tests)
                found.setdefault(key, Field()).reads.append(
                    Read(function.name, key, call.name, call.node, kind, use))
            elif call.name in stores and len(call.args) > value_at and call.args[value_at] in _NULL:
                key = _key(model, function, call.args[0])
                if key:
                    found.setdefault(key, Field()).nulls.append((function.name, call.line))
        for assignment in function.shapes.get("assignment", []):
            left, right = assignment.child_by_field_name("left"), assignment.child_by_field_name("right")
            if left is None or right is None or left.type != "field_expression" or \
                    squeeze(model.text(right)) not in _NULL or cparse.operator(assignment) != "=":
                continue
            key = _key(model, function, model.text(left))
            if key:
                found.setdefault(key, Field()).nulls.append((function.name, assignment.start_point[0] + 1))
    # a plain store counts for a field some primitive loads: only those are judged (see _verdicts)
    for entry in found.values():
        entry.nulls.sort(key=lambda item: item[1])
    return found


def _accessors(model: FileModel, loads: frozenset[str], tests: frozenset[str]) -> dict[str, str]:
    """Functions of the file that merely return a load: name -> field key."""
    found = {}
    for function in model.functions.values():
        for call in function.calls:
            if call.name in loads and call.args:
                key = _key(model, function, call.args[0])
                if key and call.name in kfacts.read_side_loads() and \
                        _classify(model, function, call.node, tests)[0] == "returned":
                    found[function.name] = key
    return found


def _key(model: FileModel, function: Function, expr: str) -> str | None:
    """The field an access path names, by its root's struct type; None when not a field of a
    typed root (a global, a macro's argument, arithmetic)."""
    text = squeeze(expr)
    root = re.match(r"&?\(?([A-Za-z_]\w*)", text)
    if root is None:
        return None
    name = root.group(1)
    resolved = function.aliases.get(name)
    if resolved is not None:
        text = resolved + text[root.end():]
        root = re.match(r"&?\(?([A-Za-z_]\w*)", text)
        name = root.group(1) if root else ""
    if not _FIELD_PATH.match(text) or name not in function.types:
        return None
    return model.canonical(function, text)


def _classify(model: FileModel, function: Function, node: tree_sitter.Node,
              tests: frozenset[str]) -> tuple[str, tree_sitter.Node | None]:
    """(kind, dereference) of the value of a load at node: see the module."""
    kind, use = _use(model, node, tests)
    if kind != "assigned":
        return kind, use
    variable = use
    for occurrence in _occurrences(model, function, variable, node.end_byte):
        kind, deref = _use(model, occurrence, tests)
        if kind in ("assigned", "stored"):
            return "other", None
        return kind, deref
    return "other", None


def _use(model: FileModel, node: tree_sitter.Node, tests: frozenset[str]):
    """How the expression at node is used by its parent: ("tested", None), ("unchecked", the
    dereference), ("returned", None), ("assigned", the local it is assigned to), ("stored", None)
    for a reassignment of the local, or ("other", None)."""
    child = node
    parent = node.parent
    while parent is not None and parent.type in _TRANSPARENT:
        child, parent = parent, parent.parent
    if parent is None:
        return "other", None
    kind = parent.type
    if kind == "field_expression" and parent.child_by_field_name("argument") == child:
        # `&p->member` computes an address without loading through p: not judged
        outer = parent.parent
        if cparse.operator(parent) != "->" or (outer is not None and outer.type == "pointer_expression"
                                         and cparse.operator(outer) == "&") or _in_sizeof(parent):
            return "other", None
        return "unchecked", parent
    if kind == "pointer_expression" and cparse.operator(parent) == "*":
        return ("other", None) if _in_sizeof(parent) else ("unchecked", parent)
    if kind == "subscript_expression" and parent.child_by_field_name("argument") == child:
        return "unchecked", parent
    if kind == "unary_expression" and cparse.operator(parent) == "!":
        return "tested", None
    if kind == "binary_expression":
        operator = cparse.operator(parent)
        if operator in ("&&", "||"):
            return "tested", None
        if operator in ("==", "!="):
            other = parent.child_by_field_name("right" if parent.child_by_field_name("left") == child else "left")
            if other is not None and squeeze(model.text(other)) in _NULL:
                return "tested", None
        return "other", None
    if kind in _CONDITIONS and parent.child_by_field_name("condition") == child:
        return "tested", None
    if kind == "conditional_expression" and parent.child_by_field_name("condition") == child:
        return "tested", None
    if kind == "argument_list" and parent.named_children and parent.named_children[0] == child:
        call = parent.parent
        callee = call.child_by_field_name("function") if call is not None else None
        if callee is not None and model.text(callee) in tests:
            return "tested", None
        return "other", None
    if kind == "return_statement":
        return "returned", None
    if kind == "assignment_expression" and cparse.operator(parent) == "=":
        left = parent.child_by_field_name("left")
        if left == child:
            return "stored", None
        if left is not None and left.type == "identifier" and parent.child_by_field_name("right") == child:
            # `if (!(p = rcu_dereference(x->f)))`: the assignment's own value is tested
            tested = _use(model, parent, tests)
            return tested if tested[0] == "tested" else ("assigned", model.text(left))
        return "other", None
    if kind == "init_declarator" and parent.child_by_field_name("value") == child:
        declarator = parent.child_by_field_name("declarator")
        while declarator is not None and declarator.type == "pointer_declarator":
            declarator = declarator.child_by_field_name("declarator")
        if declarator is not None and declarator.type == "identifier":
            return "assigned", model.text(declarator)
    return "other", None


def _in_sizeof(node: tree_sitter.Node) -> bool:
    """node is inside a sizeof or typeof, which reads no memory."""
    while node is not None and node.type not in ("compound_statement", "function_definition"):
        if node.type in ("sizeof_expression", "alignof_expression", "typeof_specifier"):
            return True
        node = node.parent
    return False


def _occurrences(model: FileModel, function: Function, variable: str, after: int):
    """The identifier nodes naming `variable` in the function's body after byte `after`, in order."""
    pattern = re.compile(rb"\b" + re.escape(variable.encode()) + rb"\b")
    body = function.body
    root = model.tree.root_node
    for match in pattern.finditer(model.source, after, body.end_byte):
        node = root.descendant_for_byte_range(match.start(), match.end())
        if node is not None and node.type == "identifier":
            yield node
