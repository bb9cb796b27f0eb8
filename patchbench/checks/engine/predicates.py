"""Small static predicates evaluated on a constant.

`static bool needs_global(int opt) { switch (opt) { case A: case B: return true; } return false; }`
is a pure function of its parameter. A caller that keeps its answer in a flag
(`bool flag = needs_global(opt);`) and later fixes `opt` to a constant (`case C:` of
`switch (opt)`, the true branch of `if (opt == C)`) knows the flag there: `evaluate()` runs the
predicate's body on the constant.

What a predicate may contain: `switch` on the parameter, `if` on comparisons of the parameter with
constants (`==`, `!=`, `&&`, `||`, `!`), `break`, and `return` of a literal (`true`, `false`, a
number) or of such a comparison. Anything else (a call, an assignment, another variable) makes
the answer unknown (None). Constants are compared by their text (`CR_FILTER` is not `CR_SLIST`):
two macro names of one value would be told apart wrongly, which only ever hides a path.

The value a path knows is either `Is(text)` (`case C:`, `if (x == C)`) or `NoneOf(texts)` (the
`default:` of a switch whose cases are texts, the false branch of `x == C`): comparisons with a
constant outside the texts are then unknown.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass

import tree_sitter

from patchbench.checks.engine import parse as cparse
from patchbench.checks.engine.model import Function, squeeze

MAX_NODES = 200   # a predicate is small: larger bodies are not evaluated
_CONSTANT = re.compile(r"^(-?\d+[uUlL]*|0[xX][0-9a-fA-F]+[uUlL]*|[A-Z][A-Z0-9_]*)$")
_LITERAL = {"true": True, "false": False}


@dataclass(frozen=True)
class Is:
    text: str


@dataclass(frozen=True)
class NoneOf:
    texts: frozenset


def constant(text: str) -> bool:
    """A number or an upper-case name (a macro or enumerator): what a case label says."""
    return bool(_CONSTANT.match(text))


def eligible(function: Function, index: int) -> bool:
    """A small static function whose parameter `index` a caller may fix."""
    if not function.is_static or index >= len(function.params):
        return False
    small = _SMALL.get(function)
    if small is None:
        small = _SMALL[function] = _small(function)
    return small


_SMALL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _small(function: Function) -> bool:
    """At most MAX_NODES nodes and no call."""
    count, pending = 0, [function.body]
    while pending:
        node = pending.pop()
        count += 1
        if count > MAX_NODES or node.type == "call_expression":
            return False
        pending.extend(node.named_children)
    return True


def evaluate(function: Function, index: int, value: Is | NoneOf) -> bool | None:
    """The predicate's answer when its parameter `index` has `value`; None when unknown."""
    param = function.params[index]
    outcome = _block(function.body.named_children, param, value)
    return outcome[1] if outcome is not None and outcome[0] == "return" else None


def _block(nodes, param: str, value) -> tuple | None:
    """("return", truth), ("break",) or ("next",) after the statements; None when unknown."""
    for node in nodes:
        outcome = _statement(node, param, value)
        if outcome is None or outcome[0] != "next":
            return outcome
    return ("next",)


def _statement(node: tree_sitter.Node, param: str, value) -> tuple | None:
    kind = node.type
    if kind == "comment":
        return ("next",)
    if kind == "compound_statement":
        return _block(node.named_children, param, value)
    if kind == "return_statement":
        if node.named_child_count != 1:
            return None
        truth = _truth(node.named_children[0], param, value)
        return None if truth is None else ("return", truth)
    if kind == "break_statement":
        return ("break",)
    if kind == "if_statement":
        truth = _truth(node.child_by_field_name("condition"), param, value)
        if truth is None:
            return None
        if truth:
            return _statement(node.child_by_field_name("consequence"), param, value)
        alternative = node.child_by_field_name("alternative")
        if alternative is None:
            return ("next",)
        return _block(alternative.named_children, param, value)   # else_clause
    if kind == "switch_statement":
        return _switch(node, param, value)
    return None


def _switch(node: tree_sitter.Node, param: str, value) -> tuple | None:
    if _text(_unwrap(node.child_by_field_name("condition"))) != param:
        return None
    body = node.child_by_field_name("body")
    cases = [c for c in (body.named_children if body is not None else []) if c.type != "comment"]
    if any(c.type != "case_statement" for c in cases):
        return None
    labels = [c.child_by_field_name("value") for c in cases]
    texts = [_text(label) for label in labels if label is not None]
    if not all(constant(t) for t in texts):
        return None
    if isinstance(value, Is):
        start = next((i for i, t in enumerate(labels) if t is not None and _text(t) == value.text), None)
    elif all(t in value.texts for t in texts):
        start = None   # none of the labels: the default, if any
    else:
        return None
    if start is None:
        start = next((i for i, t in enumerate(labels) if t is None), None)
        if start is None:
            return ("next",)
    for case in cases[start:]:
        statements = [c for c in case.named_children if c != case.child_by_field_name("value")]
        outcome = _block(statements, param, value)
        if outcome is None or outcome[0] == "return":
            return outcome
        if outcome[0] == "break":
            return ("next",)
    return ("next",)


def _truth(node: tree_sitter.Node | None, param: str, value) -> bool | None:
    if node is None:
        return None
    node = _unwrap(node)
    text = _text(node)
    if text in _LITERAL:
        return _LITERAL[text]
    if node.type == "number_literal":
        return re.fullmatch(r"0+[uUlL]*", text) is None
    if node.type == "unary_expression" and cparse.operator(node) == "!":
        inner = _truth(node.child_by_field_name("argument"), param, value)
        return None if inner is None else not inner
    if node.type != "binary_expression":
        return None
    operator = cparse.operator(node)
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    if operator in ("&&", "||"):
        first = _truth(left, param, value)
        if first is not None and first == (operator == "||"):
            return first   # short circuit
        second = _truth(right, param, value)
        if first is None or second is None:
            return None
        return second
    if operator not in ("==", "!="):
        return None
    sides = (_text(_unwrap(left)), _text(_unwrap(right)))
    other = sides[1] if sides[0] == param else sides[0] if sides[1] == param else None
    if other is None or not constant(other):
        return None
    equal = equals(value, other)
    return None if equal is None else equal == (operator == "==")


def equals(value: Is | NoneOf, other: str) -> bool | None:
    """Whether a parameter with `value` equals the constant `other` (None: cannot tell)."""
    if isinstance(value, Is):
        return value.text == other
    return False if other in value.texts else None


def _unwrap(node: tree_sitter.Node) -> tree_sitter.Node:
    while node is not None and node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def _text(node: tree_sitter.Node | None) -> str:
    return squeeze(node.text.decode("utf-8", "replace")) if node is not None and node.text is not None else ""
