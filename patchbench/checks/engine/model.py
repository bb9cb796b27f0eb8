"""The file model: what rules need to know about one C file, read once from its tree.

`FileModel.build(path, source)` parses the file (see cparse) and collects

- `functions`: every function definition (`Function`: name, node, body, lines, preceding comment,
  annotations such as `__must_hold(&x->lock)`, parameter/local types, local aliases, call sites);
  Locals assigned exactly once from an access path are aliases (`ring = &q->ring`).
- `calls` per function: `CallSite` (callee text, argument texts, node, line), in evaluation order;
- `registrations`: how functions are reached through pointers: struct initialisers
  (`.ndo_start_xmit = tun_net_xmit` gives "ndo_start_xmit") and registration calls
  (`netif_napi_add` -> "napi_poll", `netdev_rx_handler_register` -> "rx_handler", `timer_setup` ->
  "timer", `INIT_WORK`/`INIT_DELAYED_WORK` -> "work", `x.function = fn` -> "hrtimer", ...);
- `address_taken`: functions whose name is used other than as a callee (unknown callers);
- `callers`: the intra-file call graph, callee name -> call sites that call it.

Access paths: `FileModel.canonical(function, expr)` turns `&q->ring`, `q->ring`, `(&q->ring)` and a
local `ring` assigned `&q->ring` into one key. The root variable is replaced by its struct type when
known, so the key is type-based and survives renames across functions: `&q->tx_ring` with
`struct foo_queue *q` gives "foo_queue.tx_ring"; array indexes are dropped (`rings[i]` -> `rings[]`).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Iterable

import tree_sitter

from patchbench.checks.engine import parse as cparse
from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.engine.context import ALONE, TreeContext

# Everything the model reads from the tree, in one pass (one query, one pattern per fact).
_SHAPES = cparse.query("""
(labeled_statement) @label
(return_statement) @return
(switch_statement) @switch
(assignment_expression) @assignment
(init_declarator) @declarator
(update_expression) @update
(argument_list (pointer_expression) @address)
(parenthesized_expression (comma_expression) @cursor)
""")
_FACTS = cparse.query("""
(call_expression function: (_) @callee arguments: (argument_list) @args) @call
(initializer_pair designator: (field_designator (field_identifier) @init_field)
                  value: [(identifier) @init_fn (pointer_expression argument: (identifier) @init_fn)])
(assignment_expression left: (field_expression field: (field_identifier) @set_field)
                       right: (identifier) @set_fn)
""")
# A function's locals (Function.types, Function.aliases), asked of the few functions a rule
# resolves an access path in, not of every function of every file
_LOCALS = cparse.query("""
(parameter_declaration type: (_) @type declarator: (_) @decl)
(declaration type: (_) @type declarator: (_) @decl)
(assignment_expression left: (identifier) @target operator: "=" right: (_) @value)
(init_declarator declarator: (identifier) @target value: (_) @value)
(init_declarator declarator: (pointer_declarator declarator: (identifier) @target) value: (_) @value)
""")

# Registration calls (callee -> (argument index of the function, registration kind)) and field
# assignments that register a callback (`t->timer.function = fn`): the kernel facts table.
REGISTRATION_CALLS = kfacts.registration_calls()
REGISTRATION_FIELDS = kfacts.registration_fields()

# Values that make a local an alias: `&q->ring`, `q->rings[i]`, `other` (no calls, no arithmetic).
_ACCESS_PATH = re.compile(r"^&?\(?[A-Za-z_]\w*(?:(?:->|\.)[A-Za-z_]\w*|\[[^\]]*\])*\)?$")
_ANNOTATION = re.compile(r"\b(__must_hold|__acquires|__releases)\s*\(")
_INDEX = re.compile(r"\[[^\]]*\]")
# `(*p)->lock`, a lock reached through an out-parameter: the lock of p's type, as `p->lock` is
_DEREFERENCED = re.compile(r"^\(\*(\w+)\)")


def squeeze(text: str) -> str:
    """Text with all whitespace removed: the form argument texts and keys are compared in."""
    return "".join(text.split())   # str.split()'s whitespace is re's \s, at a fifth of the cost


@dataclass(eq=False)
class CallSite:
    """One call. Hashable by identity, so it can key per-call results."""
    name: str                      # callee text without spaces: "spin_lock", "ops->xmit", "guard(spinlock)"
    # argument texts (original source), whitespace removed: see `args`; or (source, argument_list
    # node) they are read from when first asked (most calls of a file are never asked)
    arguments: list[str] | tuple[bytes, tree_sitter.Node]
    node: tree_sitter.Node         # the call_expression
    line: int                      # 1-based
    function: str                  # enclosing function name
    # a cleanup.h guard of a class the facts table does not know: (lock spelling, argument texts)
    # of its DEFINE_GUARD in the tree (TreeContext.guard_class), set when the model is built
    defined_guard: tuple[str, list[str]] | None = None

    @property
    def args(self) -> list[str]:
        if isinstance(self.arguments, tuple):
            source, arguments = self.arguments
            self.arguments = [squeeze(cparse.node_text(source, a)) for a in arguments.named_children
                              if a.type != "comment"]
        return self.arguments

    @property
    def start(self) -> int:
        return self.node.start_byte

    @property
    def end(self) -> int:
        return self.node.end_byte


@dataclass(eq=False)
class Function:
    name: str
    node: tree_sitter.Node         # function_definition
    body: tree_sitter.Node         # compound_statement
    start_line: int                # 1-based, first line of the definition
    end_line: int
    is_static: bool
    comment: str                   # the comment block right above the definition ("" if none)
    body_comment: str              # the first comment inside the body ("" if none)
    annotations: list[tuple[str, str]] = field(default_factory=list)  # ("__must_hold", "&q->lock")
    params: list[str] = field(default_factory=list)          # parameter names, in order
    calls: list[CallSite] = field(default_factory=list)      # in evaluation order (by end byte)
    source: bytes = field(default=b"", repr=False)            # the file's text (nodes index it)

    @cached_property
    def types(self) -> dict[str, str]:
        """Variable (parameter or local) -> its struct/typedef name."""
        return self._locals[0]

    @cached_property
    def aliases(self) -> dict[str, str]:
        """Local -> the squeezed value it is assigned, where that is one access path (`&q->ring`)
        assigned once."""
        return self._locals[1]

    @cached_property
    def _locals(self) -> tuple[dict[str, str], dict[str, str]]:
        types: dict[str, str] = {}
        assigned: dict[str, set[str]] = {}
        for found in cparse.matches(_LOCALS, self.node):
            if "decl" in found:
                variable = _declared_name(found["decl"][0], self.source)
                if variable:
                    types[variable] = _type_name(found["type"][0], self.source)
            elif found["target"][0].start_byte >= self.body.start_byte:
                target, value = found["target"][0], found["value"][0]
                assigned.setdefault(cparse.node_text(self.source, target), set()).add(
                    squeeze(cparse.node_text(self.source, value)))
        aliases = {name: next(iter(values)) for name, values in assigned.items()
                   if len(values) == 1 and _ACCESS_PATH.match(next(iter(values)))}
        return types, aliases

    def calls_within(self, node: tree_sitter.Node) -> list[CallSite]:
        """Call sites inside node (itself included if it is a call), innermost first."""
        span = (node.start_byte, node.end_byte)
        inside = self._within.get(span)
        if inside is None:
            lo = bisect.bisect_left(self._starts, span[0])
            hi = bisect.bisect_left(self._starts, span[1])
            inside = [c for c in self._by_start[lo:hi] if c.end <= span[1]]
            inside.sort(key=lambda c: (c.end, -c.start))
            self._within[span] = inside
        return inside

    @cached_property
    def shapes(self) -> dict[str, list[tree_sitter.Node]]:
        """The body's labeled statements ("label"), returns ("return"), switches ("switch"),
        assignments ("assignment"),
        initialised declarators ("declarator"), updates ("update": `n++`), call arguments that are
        `&x` or `*p` ("address") and comma lists in parentheses ("cursor": an iterator head), found
        once by one query: every walk of the function and several rules ask."""
        return cparse.captures(_SHAPES, self.body)

    @cached_property
    def labels_and_returns(self) -> tuple[list[tree_sitter.Node], list[int]]:
        """The body's labeled statements and the start bytes of its return statements."""
        return self.shapes.get("label", []), [node.start_byte for node in self.shapes.get("return", [])]

    def _index(self) -> None:
        self._by_start = sorted(self.calls, key=lambda c: c.start)
        self._starts = [c.start for c in self._by_start]
        self._within: dict[tuple[int, int], list[CallSite]] = {}
        # what the walks read of a condition node (flow._tag_of), by node id: it depends on the
        # calls within it, so a copy with other calls (the RCU analysis's use sites) starts afresh
        self.condition_tags: dict[int, tuple[str, bool] | None] = {}


@dataclass
class FileModel:
    path: str
    source: bytes
    tree: tree_sitter.Tree
    functions: dict[str, Function]
    registrations: dict[str, set[str]]     # function name -> registration kinds
    callers: dict[str, list[CallSite]]     # in-file callee name -> its call sites
    # (function, field) -> the struct type of the initialiser registering it (`struct ethtool_ops`)
    ops_structs: dict[tuple[str, str], str] = field(default_factory=dict)
    # the fields of each ops initialiser (by its start byte), and which one registers (function, field)
    ops_groups: dict[int, dict[str, str]] = field(default_factory=dict)
    ops_group_of: dict[tuple[str, str], int] = field(default_factory=dict)
    # (function, field) -> (declared name, {field: value text}) of each initialiser entry
    # registering it (one element of an array of ops: `{ .cmd = X, .doit = fn, .internal_flags = F }`)
    ops_entries: dict[tuple[str, str], list[tuple[str, dict[str, str]]]] = field(default_factory=dict)
    # `check` only: the file's text in the patch's parent (None in lint, or for a new file), so
    # that a rule can tell what the patch changed (a read-side section the patch removed)
    previous: bytes | None = None
    # what the rest of the tree says (its call index), passed in with the file: ALONE without one
    context: TreeContext = ALONE

    def initialiser_naming(self, value: str, fields: Iterable[tuple[str, str]]) -> dict[str, str]:
        """The functions an initialiser of (struct, field) in `fields` registers, by field, when
        that field's value is `value` (the genl_family whose .small_ops is the array `value`)."""
        for (name, kind), struct in sorted(self.ops_structs.items()):
            if (struct, kind) in fields and name == value:
                return self.ops_groups.get(self.ops_group_of[(name, kind)], {})
        return {}

    def sibling(self, name: str, kind: str, other: str) -> str | None:
        """The function registered as field `other` in the initialiser registering `name` as `kind`."""
        group = self.ops_group_of.get((name, kind))
        return self.ops_groups.get(group, {}).get(other) if group is not None else None

    @classmethod
    def build(cls, path: str, source: bytes, context: TreeContext = ALONE) -> "FileModel":
        tree = cparse.parse(source)
        functions = _functions(source, tree.root_node)
        ordered = sorted(functions.values(), key=lambda f: f.node.start_byte)
        starts = [f.node.start_byte for f in ordered]
        model = cls(path, source, tree, functions, {}, {}, context=context)
        entries: dict[int, tuple[str, dict[str, str]]] = {}
        for found in cparse.matches(_FACTS, tree.root_node):
            if "call" in found:
                model._add_call(found, _owner(ordered, starts, found["call"][0]))
            elif "init_fn" in found:
                name, kind = model.text(found["init_fn"][0]), model.text(found["init_field"][0])
                model._register(name, kind)
                struct, group = _initialised_struct(found["init_field"][0], source)
                if struct:
                    model.ops_structs[(name, kind)] = struct
                    model.ops_groups.setdefault(group, {})[kind] = name
                    model.ops_group_of[(name, kind)] = group
                    listing = _enclosing(found["init_field"][0], "initializer_list")
                    key = listing.start_byte if listing is not None else -1
                    if key not in entries:   # once per initialiser, not once per field of it
                        entries[key] = _entry(listing, source)
                    model.ops_entries.setdefault((name, kind), []).append(entries[key])
            elif "set_fn" in found:
                kind = REGISTRATION_FIELDS.get(model.text(found["set_field"][0]))
                if kind:
                    model._register(model.text(found["set_fn"][0]), kind)
        for function in functions.values():
            function.calls.sort(key=lambda c: (c.end, -c.start))
            function._index()
            for call in function.calls:
                guarded = _guard_class(call)
                if guarded is not None:
                    call.defined_guard = context.guard_class(guarded)
        return model

    def _add_call(self, found: dict, owner: "Function | None") -> None:
        call_node = found["call"][0]
        callee = found["callee"][0]
        name = squeeze(self.text(callee))
        if name == "guard":   # the pre-pass turned `scoped_guard(k, &l) {` into `if(guard(k, &l)){`
            for scoped in (b"scoped_", b"scoped_cond_"):
                if self.source[callee.start_byte - len(scoped):callee.start_byte] == scoped:
                    name = scoped.decode() + "guard"
        call = CallSite(name, (self.source, found["args"][0]), call_node, call_node.start_point[0] + 1,
                        owner.name if owner else "")
        if call.name in REGISTRATION_CALLS:
            for argument, kind in kfacts.registered_by(call.name, call.args):
                self._register(argument.lstrip("&"), kind)
        if owner is not None:
            owner.calls.append(call)
            if call.name in self.functions:
                self.callers.setdefault(call.name, []).append(call)

    def _register(self, name: str, kind: str) -> None:
        self.registrations.setdefault(name, set()).add(kind)

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """compute() once per file for everything that asks with the same key (rules sharing a walk)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    @cached_property
    def _memo(self) -> dict[str, Any]:
        return {}

    def release(self) -> None:
        """Drop what the rules kept on the model: its analyses point back at it, and without that
        cycle reference counting frees a checked file's objects at once (engine/pool.py)."""
        self._memo.clear()

    @cached_property
    def address_taken(self) -> set[str]:
        """Functions named somewhere other than a callee position or their own declarator."""
        return _address_taken(self)

    def function_at(self, line: int) -> Function | None:
        for function in self.functions.values():
            if function.start_line <= line <= function.end_line:
                return function
        return None

    def text(self, node: tree_sitter.Node) -> str:
        return cparse.node_text(self.source, node)

    def has_unknown_callers(self, name: str) -> bool:
        """True when callers outside this file's call graph may exist (pointers, other files,
        any function of a header)."""
        function = self.functions.get(name)
        return (function is None or not function.is_static or self.path.endswith(".h")
                or name in self.address_taken or name in self.registrations)

    def with_callers(self, names: Iterable[str]) -> set[str]:
        """The functions named (those defined here) and their in-file callers, transitively."""
        wanted = {n for n in names if n in self.functions}
        pending = list(wanted)
        while pending:
            for call in self.callers.get(pending.pop(), []):
                if call.function and call.function not in wanted:
                    wanted.add(call.function)
                    pending.append(call.function)
        return wanted

    def at_call_site(self, key: str, callee: Function, call: CallSite) -> str:
        """A callee's access-path key seen from its caller: the root standing for one of the
        callee's parameters becomes that argument (`hso_shared_int.lock` for a parameter
        `struct hso_shared_int *p` called with `serial->shared_int` -> "hso_serial.shared_int.lock")."""
        root, rest = _split_root(key)
        for index, param in enumerate(callee.params):
            if index < len(call.args) and root in (param, callee.types.get(param)):
                return self.canonical(self.functions.get(call.function), call.args[index]) + rest
        return key

    def canonical(self, function: Function | None, expr: str) -> str:
        """One key for an access path: `&q->ring`, `q->ring`, `ring` (= &q->ring) -> "queue.ring"."""
        key = squeeze(expr)
        for _ in range(4):  # resolve chains of aliases (a = &b->c; d = a;)
            key = _strip_outer(key)
            root, rest = _split_root(key)
            if function is None or root not in function.aliases or function.aliases[root] == key:
                break
            # `struct foo *priv = data;` with `void *data`: the declaration says what it points to
            if function.types.get(function.aliases[root]) == "void" and root in function.types:
                break
            key = function.aliases[root] + rest
        key = _INDEX.sub("[]", _DEREFERENCED.sub(r"\1", key).replace("->", "."))
        root, rest = _split_root(key)
        if function is not None and root in function.types:
            key = function.types[root] + rest
        elif rest.startswith("(") and root in self.functions:
            # `rx_ring(mac)->lock`, rx_ring() an accessor of this file returning a struct pointer:
            # the lock of that type, as `rx->lock` of a `struct pasemi_mac_rxring *rx` is
            returned = self.returned_struct(root)
            depth, end = 0, None
            for index, char in enumerate(rest):
                depth += (char == "(") - (char == ")")
                if depth == 0:
                    end = index
                    break
            if returned and end is not None and rest[end + 1:end + 2] == ".":
                key = returned + rest[end + 1:]
        return key

    def returned_struct(self, name: str) -> str:
        """"T" for a function of the file declared to return `struct T *`, else ""."""
        node = self.functions[name].node
        declarator, kind = node.child_by_field_name("declarator"), node.child_by_field_name("type")
        if declarator is None or declarator.type != "pointer_declarator" or kind is None or \
                kind.type != "struct_specifier" or kind.child_by_field_name("name") is None:
            return ""
        return self.text(kind.child_by_field_name("name"))


def _strip_outer(key: str) -> str:
    while True:
        if key.startswith("&"):
            key = key[1:]
        elif key.startswith("(") and key.endswith(")") and _balanced(key[1:-1]):
            key = key[1:-1]
        else:
            return key


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if depth < 0:
            return False
    return depth == 0


_ROOT = re.compile(r"[A-Za-z_]\w*")
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*")
_FOLLOWING = re.compile(r"\s*(.?)", re.S)


def _split_root(key: str) -> tuple[str, str]:
    match = _ROOT.match(key)
    if not match:
        return "", key
    return match.group(), key[match.end():]


def _declared_name(node: tree_sitter.Node, source: bytes) -> str | None:
    while node is not None and node.type != "identifier":
        inner = node.child_by_field_name("declarator")
        if inner is None:
            return None
        node = inner
    return cparse.node_text(source, node) if node is not None else None


def _initialised_struct(node: tree_sitter.Node, source: bytes) -> tuple[str, int]:
    """The struct type of the declaration whose initialiser holds node (`static const struct
    net_device_ops foo_ops = { .ndo_open = ... }` -> "net_device_ops") and the declaration's
    start byte; "" when not one."""
    while node is not None and node.type not in ("declaration", "function_definition"):
        node = node.parent
    if node is None or node.type != "declaration":
        return "", -1
    kind = node.child_by_field_name("type")
    if kind is None or kind.type != "struct_specifier":
        return "", -1
    return _type_name(kind, source), node.start_byte


def _enclosing(node: tree_sitter.Node, kind: str) -> tree_sitter.Node | None:
    """The innermost node of type `kind` holding node."""
    while node is not None and node.type != kind:
        node = node.parent
    return node


def _entry(entry: tree_sitter.Node | None, source: bytes) -> tuple[str, dict[str, str]]:
    """(declared name, {field: squeezed value text}) of the initialiser list `entry` (None: a
    designator outside one)."""
    fields = {}
    for pair in entry.named_children if entry is not None else ():
        designator, value = pair.child_by_field_name("designator"), pair.child_by_field_name("value")
        if pair.type == "initializer_pair" and designator is not None and value is not None and \
                designator.type == "field_designator" and designator.named_child_count:
            fields[cparse.node_text(source, designator.named_children[0])] = \
                squeeze(cparse.node_text(source, value))
    declarator = _enclosing(entry, "init_declarator") if entry is not None else None
    name = ""
    if declarator is not None:
        inner = declarator.child_by_field_name("declarator")
        while inner is not None and inner.type != "identifier":
            inner = inner.child_by_field_name("declarator")
        name = cparse.node_text(source, inner) if inner is not None else ""
    return name, fields


def _type_name(node: tree_sitter.Node, source: bytes) -> str:
    if node.type in ("struct_specifier", "union_specifier"):
        name = node.child_by_field_name("name")
        return cparse.node_text(source, name) if name is not None else ""
    return cparse.node_text(source, node)


def _functions(source: bytes, root: tree_sitter.Node) -> dict[str, Function]:
    functions: dict[str, Function] = {}
    for node in root.children:
        candidates = [node]
        if node.type.startswith("preproc_"):  # definitions inside #ifdef blocks
            candidates = [c for c in node.named_children if c.type == "function_definition"]
        for candidate in candidates:
            if candidate.type == "function_definition":
                function = _function(source, candidate)
                if function is not None:
                    functions[function.name] = function
    return functions


SCOPED_GUARDS = ("scoped_guard", "scoped_cond_guard")


def _guard_class(call: CallSite) -> str | None:
    """The class of a cleanup.h guard call whose class the facts table does not know."""
    if call.name.startswith("guard("):
        found = kfacts.guard_op(call.name)
    elif call.name in SCOPED_GUARDS and call.args:
        found = kfacts.guard_op(f"guard({call.args[0]})")
    else:
        return None
    return found[0] if found is not None and found[1].kind == "guard" else None


def _owner(ordered: list["Function"], starts: list[int], node: tree_sitter.Node) -> "Function | None":
    at = bisect.bisect_right(starts, node.start_byte) - 1
    if at < 0 or node.end_byte > ordered[at].node.end_byte:
        return None
    return ordered[at]


def _function(source: bytes, node: tree_sitter.Node) -> Function | None:
    body = node.child_by_field_name("body")
    declarator = node.child_by_field_name("declarator")
    if body is None or declarator is None:
        return None
    name = _declared_name(declarator, source)
    if not name:
        return None
    header = source[node.start_byte:body.start_byte].decode("utf-8", "replace")
    function = Function(
        name=name, node=node, body=body,
        start_line=node.start_point[0] + 1, end_line=node.end_point[0] + 1,
        is_static=bool(re.search(r"\bstatic\b", header[:header.find(name)])),
        comment=_comment_above(source, node), body_comment=_first_body_comment(source, body),
        annotations=_annotations(header), params=_params(source, declarator), source=source)
    return function


def _params(source: bytes, declarator: tree_sitter.Node) -> list[str]:
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    parameters = declarator.child_by_field_name("parameters") if declarator is not None else None
    if parameters is None:
        return []
    return [_declared_name(p.child_by_field_name("declarator"), source) or ""
            for p in parameters.named_children if p.type == "parameter_declaration"]


def _annotations(header: str) -> list[tuple[str, str]]:
    found = []
    for match in _ANNOTATION.finditer(header):
        depth, i = 1, match.end()
        while i < len(header) and depth:
            depth += header[i] == "("
            depth -= header[i] == ")"
            i += 1
        found.append((match.group(1), squeeze(header[match.end():i - 1])))
    return found


def _comment_above(source: bytes, node: tree_sitter.Node) -> str:
    texts = []
    sibling = node.prev_sibling
    line = node.start_point[0]
    while sibling is not None and sibling.type == "comment" and sibling.end_point[0] >= line - 1:
        texts.append(cparse.node_text(source, sibling))
        line = sibling.start_point[0]
        sibling = sibling.prev_sibling
    return "\n".join(reversed(texts))


def _first_body_comment(source: bytes, body: tree_sitter.Node) -> str:
    for child in body.named_children[:3]:
        if child.type == "comment":
            return cparse.node_text(source, child)
    return ""


def _address_taken(model: FileModel) -> set[str]:
    taken = set()
    text = model.source.decode("latin-1")
    root = model.tree.root_node
    for name in model.functions:
        if not _IDENTIFIER.fullmatch(name) or not name.isascii():
            continue   # never a whole word of the latin-1 text
        at = text.find(name)   # each name's few places, not every word of the file
        while at >= 0:
            end = at + len(name)
            if (at == 0 or not _is_word(text[at - 1])) and (end == len(text) or not _is_word(text[end])) \
                    and _FOLLOWING.match(text, end).group(1) != "(":   # not a call, prototype or definition
                node = root.descendant_for_byte_range(at, end)
                if node is not None and node.type == "identifier":
                    taken.add(name)
                    break
            at = text.find(name, at + 1)
    return taken


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"   # what \w matches in a str pattern
