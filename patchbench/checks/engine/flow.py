"""Path-sensitive walk of one function body, with an abstract state supplied by a rule.

A state is any hashable value; rules use a frozenset of facts such as ("lock", "foo_queue.tx_ring.consumer_lock").
The walker keeps the SET of distinct states reaching each point (one per path class), follows
if/else (including `if (spin_trylock(..))`, `if (!mutex_trylock(..))`, `&&`, `||`, `x == 0`),
switch/case with fall-through, while/for/do loops (to a fixpoint), break/continue, goto and
labels (forward and backward), return, calls that never return (`BUG()`, `panic()`: the path
ends), and statement expressions; `#if`/`#ifdef` blocks in a body (also around case labels) are
walked on every branch.

A rule describes its semantics with a `Transfer`:

    class Held(flow.Transfer):
        def call(self, state, call):             # effect of evaluating a call
            if call.name == "spin_lock":
                return state | {("lock", call.args[0])}
            return state
        def assume(self, state, call, truth):    # the call's value was tested: truth of "nonzero"
            if call.name == "spin_trylock" and truth:
                return state | {("lock", call.args[0])}
            return state

    result = flow.walk(function, Held(), entry=frozenset())
    result.held_at(call)      # facts true on EVERY path reaching the call (intersection)
    result.states_at(call)    # the distinct states reaching it
    result.returns            # [(return node or the closing brace, state at that exit), ...]

Calls are evaluated innermost first, left to right; `call()` runs for every call, then, when the
call (or a variable it was just assigned to: `err = mutex_lock_interruptible(m); if (err)`) is
tested by a condition, `assume()` refines the state of each branch.

A flag assigned the answer of a small static predicate of the file (`needs = pred(opt)`, see
`Transfer.predicate` and predicates.py) is known where a `case C:` of `switch (opt)` or an
`if (opt == C)` fixes opt: the predicate is run on C and the flag's tag set accordingly. A test
of two variables (`a == b`, `a != b`) is passed to `Transfer.equal()`.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Hashable, Iterable

import tree_sitter

from patchbench.checks.engine import parse as cparse
from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.engine import predicates
from patchbench.checks.engine.model import CallSite, Function, squeeze

State = Hashable
MAX_STATES = 64          # distinct states kept per program point; beyond, branch tags are forgotten, then paths dropped
LOOP_ROUNDS = 4           # a loop body is re-walked until its entry states stop changing, at most this often
GOTO_ROUNDS = 3           # whole-body walks to settle backward gotos
# Calls that never return: the path ends there (it is not a return path).
NORETURN = frozenset({"BUG", "panic", "do_exit", "kthread_exit", "kthread_complete_and_exit",
                      "__builtin_unreachable", "unreachable", "machine_halt", "emergency_restart"})


class Transfer:
    """The semantics a rule gives to calls and tests. Override what you need.

    With `correlate_branches = True` (frozenset states only), an `if (x)` on a condition without
    calls (or only IS_ENABLED()-like ones) or side effects, whose branches leave different states
    (or leave by break, goto or return), tags them with
    ("branch", "x", True/False); a later `if (x)` sends each tagged state down its own branch only,
    so `if (lock) spin_lock(l); ... if (lock) spin_unlock(l);` is balanced. Assigning a variable
    named in x, or passing its address to a call, drops its tags; `x = true/false/NULL` tags it
    (and adds ("set", "x"): the path knows x from its own assignment, not only from a test).
    The tag of an `if` (or of an operand of && and ||) is made only where something may read it
    (see `_readers`): where the same text is tested again (or the test is in a loop, or a goto
    jumps back), returned, or is a parameter; an assignment's or a flag's, where the variable is
    tested, returned or a parameter. The others would only multiply the states (a function's
    `if (!skb) return;` checks, each tested once, made every path after them twice as many).
    `#if` branches and retry loops are tagged always: few, and read by their own kind.
    """

    correlate_branches = False
    # keep the states reaching each statement (FlowResult.states_before), for rules that judge
    # what holds at a place that is not a call (a field access)
    record_statements = False

    def call(self, state: State, call: CallSite) -> State:
        return state

    def changes(self, call: CallSite) -> bool:
        """False when call() returns every state as it is: the walker then skips it."""
        return True

    def assume(self, state: State, call: CallSite, truth: bool) -> State:
        """State after a branch learnt that `call` returned nonzero (truth) or zero."""
        return state

    def test(self, state: State, expression: str, truth: bool, function: Function) -> State:
        """State after a branch learnt that a call-free `expression` (`lock`, `q->lock`) is
        nonzero (truth) or zero; expression is the squeezed source text."""
        return state

    def assign(self, state: State, target: str, value: tree_sitter.Node, function: Function) -> State:
        """`target = value` (declaration or assignment statement), after the calls in value."""
        return state

    def assigns(self, target: str, value: tree_sitter.Node, function: Function) -> bool:
        """False when assign() returns every state as it is for this assignment: the walker then
        skips it."""
        return True

    def equal(self, state: State, left: str, right: str, truth: bool) -> State:
        """State after a branch learnt that the variables `left` and `right` (`a == b`, `a != b`)
        are equal (truth) or not."""
        return state

    def decisive(self, state: State) -> Hashable:
        """The facts of a state that branch tags exist to keep apart (held locks, for a lock rule):
        when paths must be merged, the tags that tell these apart are forgotten last."""
        return frozenset(fact for fact in state if not _is_tag(fact))

    def leave_block(self, state: State, block: tree_sitter.Node) -> State:
        """State after control leaves the compound statement `block` (its end, or a return,
        break, continue or goto out of it): where cleanup.h's guard() releases its lock."""
        return state

    def predicate(self, name: str) -> Function | None:
        """The in-file function `name` when the walk may evaluate it on a constant (a small
        static predicate, see predicates.py): a flag assigned its answer (`flag = pred(x)`) is
        then known where a `case C:` or `if (x == C)` fixes x."""
        return None


@dataclass
class FlowResult:
    function: Function
    at_call: dict[CallSite, set] = field(default_factory=dict)
    returns: list[tuple[tree_sitter.Node, State]] = field(default_factory=list)
    at_statement: dict[int, set] = field(default_factory=dict)   # start byte -> states (record_statements)

    def states_before(self, node: tree_sitter.Node) -> set:
        """The distinct states reaching the innermost statement around `node` (the walk must record
        statements); empty when it is unreachable."""
        current = node
        while current is not None and current != self.function.body:
            if current.type in _RECORDED and current.start_byte in self.at_statement:
                return self.at_statement[current.start_byte]
            current = current.parent
        return set()

    def states_at(self, call: CallSite) -> set:
        """The distinct states reaching the call (empty when it is unreachable)."""
        return self.at_call.get(call, set())

    def held_at(self, call: CallSite) -> frozenset:
        """Facts present on every path reaching the call (frozenset states only)."""
        return intersection(self.states_at(call))

    def maybe_at(self, call: CallSite) -> frozenset:
        """Facts present on some path reaching the call."""
        return frozenset().union(*self.states_at(call))

    def exit_states(self) -> set:
        return {state for _, state in self.returns}


def intersection(states: Iterable[frozenset]) -> frozenset:
    states = list(states)
    if not states:
        return frozenset()
    return frozenset.intersection(*states)


@lru_cache(maxsize=1)
def _stable_queries() -> frozenset[str]:
    """Calls that answer the same within a function (kernel facts table, [flow])."""
    return kfacts.names("flow", "stable_queries")


@lru_cache(maxsize=4096)
def _named_query(name: str) -> bool:
    """The call is named as a query of its argument (mlx4_is_mfunc(dev)): facts table [flow]
    query_words, on whole words."""
    words = name.split("_")
    return len(words) > 1 and (not _QUERY_WORDS.isdisjoint(words[:-1]) or words[-1] in _QUERY_LAST_WORDS)


_QUERY_WORDS = kfacts.names("flow", "query_words")
_QUERY_LAST_WORDS = kfacts.names("flow", "query_last_words")
# values whose assignment makes a variable a flag the walk can follow (`locked = true;`)
KNOWN_TRUTH = {"true": True, "1": True, "false": False, "0": False, "NULL": False}
_SIDE_EFFECT = re.compile(r"(?<![=!<>])=(?!=)|\+\+|--")
LOOPS = ("while_statement", "for_statement", "do_statement")
_CONDITIONALS = ("preproc_if", "preproc_ifdef", "preproc_elif", "preproc_elifdef")
_RECORDED = frozenset({"expression_statement", "declaration", "return_statement", "if_statement", "while_statement",
                       "for_statement", "do_statement", "switch_statement", "case_statement"})
_SKIPPED = ("comment", "type_definition", "struct_specifier", "enum_specifier", "union_specifier",
            "preproc_def", "preproc_function_def", "preproc_call", "preproc_include", ";", "{", "}")


def walk(function: Function, transfer: Transfer, entry: State = frozenset()) -> FlowResult:
    """Walk the function's body from `entry`; see the module docstring."""
    return _Walker(function, transfer).run(entry)


def walk_states(function: Function, transfer: Transfer, entries: Iterable[State]) -> FlowResult:
    """Walk the function's body from several entry states at once (one per way into it): the
    states reaching each call are those of every entry's paths."""
    return _Walker(function, transfer).run(entry=None, entries=set(entries))


class _Walker:
    def __init__(self, function: Function, transfer: Transfer):
        self.function = function
        self.transfer = transfer
        self.labels: dict[str, set] = {}
        self.breaks: list[set] = []
        self.continues: list[set] = []
        self.tested: dict[str, CallSite] = {}   # variable -> the call whose result it holds
        self.flags: dict[str, tuple[Function, list[tuple[int, str]]]] = {}   # see fixed()
        self._assignments: dict[str, list[int]] | None = None
        self.tag_texts: set[str] = set()         # the text of every branch tag a state may carry
        self.result = FlowResult(function)
        self.blocks: list[tree_sitter.Node] = []   # the compound statements open at this point
        self.break_depths: list[int] = []           # len(blocks) at each enclosing loop/switch
        self.continue_depths: list[int] = []        # len(blocks) at each enclosing loop
        self.scoped = type(transfer).leave_block is not Transfer.leave_block
        self.recording = transfer.record_statements
        self._label_nodes: dict[str, tree_sitter.Node] | None = None
        self._universe: tuple[int, frozenset] = (0, frozenset())   # see tag_universe()
        self._bounded: dict[tuple[frozenset, frozenset], set] = {}   # see bounded()

    def run(self, entry: State, entries: set | None = None) -> FlowResult:
        starts = {entry} if entries is None else entries
        for start in starts:
            if isinstance(start, frozenset):   # a caller's tags may come in with the entry
                self.tag_texts.update(f[1] for f in start if isinstance(f, tuple) and f[0] == "branch")
        for _ in range(GOTO_ROUNDS):
            self.passed: dict[str, set] = {}   # label -> the states it was walked with
            self.backward = False              # a goto reached a passed label with new states
            self.result = FlowResult(self.function)
            end = self.statement(self.function.body, set(starts))
            closing = self.function.body.children[-1] if self.function.body.children else self.function.body
            self.result.returns.extend((closing, state) for state in end)
            if not self.backward:
                break
        return self.result

    def tag_universe(self) -> frozenset:
        """Every branch tag a state of this walk may carry (tag_texts only grows): a state's tags
        are its intersection with this, found without a loop in Python."""
        if self._universe[0] != len(self.tag_texts):
            self._universe = (len(self.tag_texts), frozenset(
                ("branch", text, truth) for text in self.tag_texts for truth in (True, False)))
        return self._universe[1]

    def bounded(self, states: set) -> set:
        """_bounded(), once per distinct set of states and tag universe in this walk: a loop's
        later rounds and a goto's re-walk meet the same sets again (half the time it took)."""
        key = (frozenset(states), self.tag_universe())
        found = self._bounded.get(key)
        if found is None:
            found = self._bounded[key] = _bounded(states, self.transfer, key[1])
        return set(found)   # a copy: the walk adds to the sets it is handed

    # -- statements -------------------------------------------------------------------------
    def statement(self, node: tree_sitter.Node, states: set) -> set:
        kind = node.type
        if len(states) > MAX_STATES:
            states = self.bounded(states)
        if kind in _SKIPPED:
            return states
        if self.recording and kind in _RECORDED:
            self.result.at_statement.setdefault(node.start_byte, set()).update(states)
        if kind == "compound_statement" and self.scoped:
            self.blocks.append(node)
            try:
                states = self.statement_list(node, states)
            finally:
                self.blocks.pop()
            return {self.transfer.leave_block(state, node) for state in states}
        if kind in ("compound_statement", "translation_unit"):
            return self.statement_list(node, states)
        if kind in _CONDITIONALS:
            return self.conditional(node, states)
        if kind == "expression_statement":
            return self.expression(node, states)
        if kind == "declaration":
            return self.declaration(node, states)
        if kind == "if_statement":
            return self.if_statement(node, states)
        if kind in LOOPS:
            return self.loop(node, states)
        if kind == "switch_statement":
            return self.switch(node, states)
        if kind == "return_statement":
            states = self.leave(self.expression(node, states), 0)
            self.result.returns.extend((node, state) for state in states)
            return set()
        if kind == "break_statement":
            if self.breaks:
                self.breaks[-1] |= self.leave(states, self.break_depths[-1])
            return set()
        if kind == "continue_statement":
            if self.continues:
                self.continues[-1] |= self.leave(states, self.continue_depths[-1])
            return set()
        if kind == "goto_statement":
            label = node.child_by_field_name("label")
            if label is not None:
                name = _text(label)
                if self.scoped:
                    states = self.leave(states, self.label_depth(name))
                self.labels.setdefault(name, set()).update(states)
                if name in self.passed and not states <= self.passed[name]:
                    self.backward = True
            return set()
        if kind == "labeled_statement":
            label = node.child_by_field_name("label")
            if label is not None:
                name = _text(label)
                states = states | self.labels.get(name, set())
                self.passed[name] = states
            for child in node.named_children[1:]:
                states = self.statement(child, states)
            return states
        if kind in ("case_statement", "attributed_statement", "ERROR", "else_clause"):
            for child in node.named_children:
                if child.type.endswith("statement") or child.type in ("declaration", "ERROR") \
                        or child.type.startswith("preproc_"):
                    states = self.statement(child, states)
                else:
                    states = self.expression(child, states)
            return states
        return self.expression(node, states)

    def statement_list(self, node: tree_sitter.Node, states: set) -> set:
        return self.statement_list_of(node.named_children, states)

    def conditional(self, node: tree_sitter.Node, states: set) -> set:
        """`#if`/`#ifdef`/`#ifndef` (and its `#elif`s) in a body: every branch is walked and the
        results joined, a missing `#else` being an empty one. With branch correlation, each path
        is tagged with the branch it took, so a later conditional on the same text takes the same
        one (`#ifdef CONFIG_X lock #endif ... #ifdef CONFIG_X unlock #endif` is balanced)."""
        key, truth = self.directive(node)
        taken, not_taken = set(states), set(states)
        if self.transfer.correlate_branches:
            taken = {_tagged(s, key, truth) for s in states if ("branch", key, not truth) not in s}
            not_taken = {_tagged(s, key, not truth) for s in states if ("branch", key, truth) not in s}
            self.tag_texts.add(key)
        alternative = node.child_by_field_name("alternative")
        out = self.statement_list_of(_branch_body(node), taken)
        if alternative is not None and alternative.type == "preproc_else":
            not_taken = self.statement_list_of(alternative.named_children, not_taken)
        elif alternative is not None:
            not_taken = self.conditional(alternative, not_taken)
        if self.transfer.correlate_branches:
            tags = {("branch", key, True), ("branch", key, False)}
            untagged = {state - tags for state in out}
            if untagged == {state - tags for state in not_taken}:
                return untagged   # the branches agree: forget which one was taken
        return out | not_taken

    def statement_list_of(self, nodes: list[tree_sitter.Node], states: set) -> set:
        for child in nodes:
            states = self.statement(child, states)
        return states

    def directive(self, node: tree_sitter.Node) -> tuple[str, bool]:
        """(text, truth) naming a conditional's test: ("#ifdef X", False) for `#ifndef X`."""
        name = node.child_by_field_name("name")
        if name is not None:   # #ifdef / #ifndef (and #elifdef)
            negated = node.children[0].type in ("#ifndef", "#elifndef")
            return "#ifdef " + _text(name), not negated
        condition = node.child_by_field_name("condition")
        return "#if " + squeeze(_text(condition) if condition is not None else ""), True

    def leave(self, states: set, depth: int) -> set:
        """States after leaving the open blocks deeper than `depth` (innermost first)."""
        if not self.scoped:
            return states
        for block in reversed(self.blocks[depth:]):
            states = {self.transfer.leave_block(state, block) for state in states}
        return states

    def label_depth(self, name: str) -> int:
        """How many of the open blocks contain the label `name` (all of them when unknown)."""
        if self._label_nodes is None:
            self._label_nodes = {}
            for current in self.function.labels_and_returns[0]:
                label = current.child_by_field_name("label")
                if label is not None:
                    self._label_nodes[_text(label)] = current
        target = self._label_nodes.get(name)
        if target is None:
            return len(self.blocks)
        depth = 0
        for block in self.blocks:
            if not (block.start_byte <= target.start_byte and target.end_byte <= block.end_byte):
                break
            depth += 1
        return depth

    def declaration(self, node: tree_sitter.Node, states: set) -> set:
        states = self.expression(node, states, assignments=False)
        for declarator in node.children_by_field_name("declarator"):
            value = declarator.child_by_field_name("value")
            target = declarator.child_by_field_name("declarator")
            while target is not None and target.type != "identifier":
                target = target.child_by_field_name("declarator")
            if value is not None and target is not None:
                states = self.assign(_text(target), value, states)
        return states

    def if_statement(self, node: tree_sitter.Node, states: set) -> set:
        condition = node.child_by_field_name("condition")
        taken, not_taken = self.condition(condition, states)
        if self.flags:   # `if (x == C)`: a flag holding a predicate of x is known on both ways
            compared = self.comparison(condition)
            if compared is not None:
                subject, label, equal = compared
                taken = self.fixed(taken, subject, predicates.Is(label) if equal
                                   else predicates.NoneOf(frozenset({label})))
                not_taken = self.fixed(not_taken, subject, predicates.NoneOf(frozenset({label})) if equal
                                       else predicates.Is(label))
        tag = self.read_tag(condition)
        if tag is not None:   # tagged on entry, so that paths leaving by break/goto/return keep it
            text, truth = tag
            self.tag_texts.add(text)
            taken = {_tagged(state, text, truth) for state in taken}
            not_taken = {_tagged(state, text, not truth) for state in not_taken}
        consequence = node.child_by_field_name("consequence")
        out = self.statement(consequence, taken)
        if self.scoped and consequence.type != "compound_statement":   # scoped_guard(k, &l) stmt;
            out = {self.transfer.leave_block(state, consequence) for state in out}
        alternative = node.child_by_field_name("alternative")
        if alternative is not None:
            not_taken = self.statement(alternative, not_taken)
        if tag is not None:
            tags = {("branch", text, True), ("branch", text, False)}
            untagged_out = {state - tags for state in out}
            untagged_not_taken = {state - tags for state in not_taken}
            if untagged_out == untagged_not_taken:
                return untagged_out   # the branches agree: forget the test
        return out | not_taken

    def comparison(self, condition: tree_sitter.Node | None) -> tuple[str, str, bool] | None:
        """(variable, constant, True) for `x == C` (also `C == x`), False for `x != C`."""
        node = _unwrap(condition) if condition is not None else None
        if node is None or node.type != "binary_expression" or cparse.operator(node) not in ("==", "!="):
            return None
        left = squeeze(_text(_unwrap(node.child_by_field_name("left"))))
        right = squeeze(_text(_unwrap(node.child_by_field_name("right"))))
        if predicates.constant(left):
            left, right = right, left
        if not left.isidentifier() or not predicates.constant(right):
            return None
        return left, right, cparse.operator(node) == "=="

    def branch_tag(self, condition: tree_sitter.Node | None) -> tuple[str, bool] | None:
        """(text, truth) of a call-free condition, with `!` peeled off and `a != b` read as
        `!(a == b)`; None otherwise."""
        if not self.transfer.correlate_branches or condition is None:
            return None
        return _tag_of(self.function, condition)

    def read_tag(self, condition: tree_sitter.Node | None) -> tuple[str, bool] | None:
        """branch_tag(), where something may read the tag: tested again, returned, a parameter."""
        tag = self.branch_tag(condition)
        return tag if tag is not None and tag[0] in _readers(self.function).retested else None

    def correlated(self, node: tree_sitter.Node, states: set) -> tuple[set, set, set]:
        """(tagged true, tagged false, untagged) states for this condition."""
        tag = self.branch_tag(node)
        if tag is None:
            return set(), set(), states
        text, truth = tag
        taken, not_taken, untagged = set(), set(), set()
        for state in states:
            if ("branch", text, truth) in state:
                taken.add(state)
            elif ("branch", text, not truth) in state:
                not_taken.add(state)
            else:
                untagged.add(state)
        return taken, not_taken, untagged

    def loop(self, node: tree_sitter.Node, states: set) -> set:
        kind = node.type
        if kind == "for_statement":
            initializer = node.child_by_field_name("initializer")
            if initializer is not None:
                states = self.statement(initializer, states) if initializer.type == "declaration" \
                    else self.expression(initializer, states)
        condition = node.child_by_field_name("condition")
        update = node.child_by_field_name("update")
        body = node.child_by_field_name("body")
        if condition is not None and self.transfer.correlate_branches:
            for variable in self.iterator_variables(condition):
                states = self.forget(variable, states)
        exit_tag = self.loop_tag(condition)
        if exit_tag is not None:   # what was known of the counter before the loop is stale in it
            states = {_untagged(state, exit_tag[0]) for state in states}
        head = set(states)
        out: set = set()
        broken: set = set()
        once = kind == "for_statement" and self.runs_once(node)
        looped: set = set()   # the states that came round the loop
        for _ in range(LOOP_ROUNDS):
            if kind == "do_statement":
                entering = head
            else:
                entering, leaving = self.condition(condition, head)
                if once:   # `for (i = 0; i < N; i++)` is never left before its first turn
                    leaving = self.condition(condition, looped)[1] if looped else set()
                out |= leaving
            self.breaks.append(set())
            self.continues.append(set())
            self.break_depths.append(len(self.blocks))
            self.continue_depths.append(len(self.blocks))
            after = self.statement(body, entering) if body is not None else entering
            self.break_depths.pop()
            self.continue_depths.pop()
            broken |= self.breaks.pop()
            after |= self.continues.pop()
            if update is not None:
                after = self.expression(update, after)
            if kind == "do_statement":
                after, leaving = self.condition(condition, after)
                out |= leaving
            looped |= after
            if after <= head:
                break
            head |= after
        if exit_tag is not None and broken and out and \
                {self.transfer.decisive(s) for s in broken} != {self.transfer.decisive(s) for s in out}:
            # a retry loop: `do { lock; if (done) break; unlock; } while (++cnt < max);` then
            # `if (cnt >= max) return -EAGAIN;`: the paths that ran out of tries left by the
            # condition, those that succeeded by `break` (with the counter still within bounds)
            text, truth = exit_tag
            self.tag_texts.add(text)
            out = {_untagged(s, text) | {("branch", text, not truth)} for s in out}
            broken = {_untagged(s, text) | {("branch", text, truth)} for s in broken}
        return out | broken

    def runs_once(self, node: tree_sitter.Node) -> bool:
        """A counted loop whose first test holds: `for (i = 0; i < 3; i++)` or `i < MAX_TRIES`
        (a constant's name), the counter starting from a number below it."""
        initializer, condition = node.child_by_field_name("initializer"), node.child_by_field_name("condition")
        if initializer is None or condition is None:
            return False
        start = re.fullmatch(r"(?:int\s+)?(\w+)\s*=\s*(\w+)", _text(initializer).strip().rstrip(";"))
        bound = re.fullmatch(r"(\w+)\s*([<>]=?)\s*(\w+)", _text(_unwrap(condition)).strip())
        if start is None or bound is None or start.group(1) != bound.group(1):
            return False
        first, operator, limit = start.group(2), bound.group(2), bound.group(3)
        if first.isdigit() and limit.isdigit():
            return {"<": int(first) < int(limit), "<=": int(first) <= int(limit),
                    ">": int(first) > int(limit), ">=": int(first) >= int(limit)}[operator]
        constant = re.compile(r"[A-Z][A-Z0-9_]*")
        if operator.startswith("<"):   # for (i = 0; i < N_RINGS; i++)
            return first.isdigit() and constant.fullmatch(limit) is not None
        return limit.isdigit() and constant.fullmatch(first) is not None   # for (i = N; i > 0; i--)

    def loop_tag(self, condition: tree_sitter.Node | None) -> tuple[str, bool] | None:
        """(text, truth) of a loop condition comparing a counter with a call-free bound
        (`++cnt < max_retries`, `--remaining > 0`), the counter's ++/-- left out, in the form
        branch_tag() gives a later test of it (`cnt >= max_retries`); None for other loops."""
        if not self.transfer.correlate_branches or condition is None:
            return None
        node = _unwrap(condition)
        if node.type != "binary_expression" or cparse.operator(node) not in _RELATIONAL or \
                self.function.calls_within(node):
            return None
        sides = []
        for side in (node.child_by_field_name("left"), node.child_by_field_name("right")):
            side = _unwrap(side)
            if side.type == "update_expression":
                side = side.child_by_field_name("argument")
            text = squeeze(_text(side))
            if side is None or _SIDE_EFFECT.search(text):
                return None
            sides.append(text)
        return _relation(sides[0], cparse.operator(node), sides[1])

    def switch(self, node: tree_sitter.Node, states: set) -> set:
        states = self.expression(node.child_by_field_name("condition"), states)
        body = node.child_by_field_name("body")
        self.breaks.append(set())
        self.break_depths.append(len(self.blocks))
        falling: set = set()
        has_default = False
        cases = _cases(body.named_children) if body is not None else []
        subject = squeeze(_text(_unwrap(node.child_by_field_name("condition"))))
        labels = [squeeze(_text(value)) for case in cases if case.type == "case_statement"
                  and (value := case.child_by_field_name("value")) is not None]
        others = predicates.NoneOf(frozenset(labels)) if all(map(predicates.constant, labels)) else None
        for case in cases:
            if case.type == "case_statement":
                value = case.child_by_field_name("value")
                has_default |= value is None
                label = squeeze(_text(value)) if value is not None else None
                fixing = others if label is None else predicates.Is(label) if predicates.constant(label) else None
                entering = self.fixed(states, subject, fixing)
                falling = self.statement(case, falling | entering)
            else:
                falling = self.statement(case, falling)
        self.break_depths.pop()
        out = self.breaks.pop() | falling
        return out if has_default else out | self.fixed(states, subject, others)

    def flag(self, target: str, call: CallSite, value: tree_sitter.Node) -> None:
        """Note `target = pred(x)` (pred a small static predicate, see Transfer.predicate) when
        neither target nor x is assigned anywhere after it: fixed() then knows target's value
        where x is fixed to a constant."""
        function = self.transfer.predicate(call.name)
        if function is None or not target.isidentifier():
            return
        arguments = [(index, squeeze(argument)) for index, argument in enumerate(call.args)
                     if squeeze(argument).isidentifier() and predicates.eligible(function, index)]
        if not arguments:
            return
        if self._assignments is None:
            self._assignments = _ASSIGNMENTS.get(self.function)
            if self._assignments is None:
                self._assignments = _ASSIGNMENTS[self.function] = _assignments(self.function)
        if any(at != value.start_byte for at in self._assignments.get(target, [])):
            return
        arguments = [(index, argument) for index, argument in arguments
                     if not any(at > value.start_byte for at in self._assignments.get(argument, []))]
        if arguments:
            self.flags[target] = (function, arguments)

    def fixed(self, states: set, subject: str, value) -> set:
        """The states of a path on which `subject` has `value` (predicates.Is or NoneOf): a flag
        holding a predicate of subject (`needs = pred(subject)`) is known there; the states
        tagged with its other value do not take this path."""
        if value is None or not self.flags or not self.transfer.correlate_branches:
            return states
        for flag in sorted(self.flags):
            function, arguments = self.flags[flag]
            for index, argument in arguments:
                truth = predicates.evaluate(function, index, value) if argument == subject else None
                if truth is None or flag not in _readers(self.function).tested:
                    continue
                self.tag_texts.add(flag)
                states = {_tagged(state, flag, truth) for state in states
                          if ("branch", flag, not truth) not in state}
        return states

    # -- expressions ------------------------------------------------------------------------
    def expression(self, node: tree_sitter.Node | None, states: set, assignments: bool = True) -> set:
        if node is None:
            return states
        for call in self.function.calls_within(node):
            states = self.call(call, states)
        if assignments:
            for assignment in self.assignments(node):
                if assignment.type == "update_expression":   # x++: only what was known of x goes
                    target = assignment.child_by_field_name("argument")
                    if target is not None and self.transfer.correlate_branches:
                        states = self.forget(_text(target), states)
                    continue
                left = assignment.child_by_field_name("left")
                states = self.assign(squeeze(_text(left)), assignment.child_by_field_name("right"), states,
                                     plain=cparse.operator(assignment) == "=")
        return states

    def assignments(self, node: tree_sitter.Node) -> list[tree_sitter.Node]:
        """`x = value`, `p->f = value`, `x += v` and `x++` at the top of an expression statement
        (or a comma list); `p->flags |= bit` is left alone (a test of another bit still holds)."""
        found = []
        pending = [node]
        while pending:
            current = pending.pop()
            if current.type in ("expression_statement", "parenthesized_expression", "comma_expression"):
                pending.extend(current.named_children)
            elif current.type == "assignment_expression" and (
                    current.child_by_field_name("left").type == "identifier" or
                    (current.child_by_field_name("left").type in ("field_expression", "pointer_expression")
                     and cparse.operator(current) == "=")):
                # `priv->pending = true;`: a flag a later test reads; `*_dropped_lock = true;`:
                # a flag of the caller's (see Transfer.assign)
                found.append(current)
            elif current.type == "update_expression" and current.child_by_field_name("argument") is not None \
                    and current.child_by_field_name("argument").type == "identifier":
                found.append(current)
        return found

    def call(self, call: CallSite, states: set) -> set:
        seen = self.result.at_call.setdefault(call, set())
        seen |= states
        if call.name in NORETURN:
            return set()
        if self.transfer.correlate_branches:
            for argument in call.args:   # foo(&flag) may change flag
                if argument.startswith("&") and argument[1:].isidentifier():
                    states = self.forget(argument[1:], states)
        if not self.transfer.changes(call):
            return set(states)
        return {self.transfer.call(state, call) for state in states}

    def assign(self, target: str, value: tree_sitter.Node | None, states: set, plain: bool = True) -> set:
        """`target = value` (plain) or `target op= value`."""
        if value is None:
            return states
        inner = _unwrap(value)
        self.flags.pop(target, None)
        if inner.type == "call_expression" and plain:
            calls = self.function.calls_within(inner)
            if calls and calls[-1].node == inner:
                self.tested[target] = calls[-1]
                if self.transfer.correlate_branches:
                    self.flag(target, calls[-1], value)
        else:
            self.tested.pop(target, None)
        if self.transfer.correlate_branches:
            states = self.forget(target, states)
            known = KNOWN_TRUTH.get(squeeze(_text(inner))) if plain else None
            if known is not None and target in _readers(self.function).tested:
                # `locked = true;`: a later `if (locked)` knows its branch
                self.tag_texts.add(target)
                states = {state | {("branch", target, known), ("set", target)} for state in states}
        if not self.transfer.assigns(target, value, self.function):
            return states
        return {self.transfer.assign(state, target, value, self.function) for state in states}

    def iterator_variables(self, condition: tree_sitter.Node) -> list[str]:
        """The variables of a rewritten iterator head `while (pos, head, member)`: it assigns them."""
        inner = _unwrap(condition)
        if inner.type != "comma_expression":
            return []
        return [_text(n) for n in _comma_items(inner) if n.type == "identifier"]

    def forget(self, variable: str, states: set) -> set:
        """Drop the branch tags of conditions that mention `variable` (it changed)."""
        variable = variable.lstrip("*")
        # the tags that name it, from the few texts tagged in this walk, not from every fact
        # (the word pattern compiled only for a variable some text contains)
        stale = {fact for text in self.tag_texts if variable in text and _word(variable).search(text)
                 for fact in (("branch", text, True), ("branch", text, False), ("set", text))}
        if not stale:
            return set(states)
        return {state if stale.isdisjoint(state) else state - stale for state in states}

    def condition(self, node: tree_sitter.Node | None, states: set) -> tuple[set, set]:
        """(states where the condition is true, states where it is false)."""
        if node is None:
            return states, set()
        taken, not_taken, states = self.correlated(node, states)
        if taken or not_taken:
            more_taken, more_not_taken = self.condition(node, states) if states else (set(), set())
            return taken | more_taken, not_taken | more_not_taken
        node = _unwrap(node)
        kind = node.type
        if kind == "unary_expression" and cparse.operator(node) == "!":
            taken, not_taken = self.condition(node.child_by_field_name("argument"), states)
            return not_taken, taken
        if kind == "binary_expression":
            operator = cparse.operator(node)
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if operator == "&&":
                left_true, left_false = self.operand(left, states)
                right_true, right_false = self.operand(right, left_true)
                return right_true, left_false | right_false
            if operator == "||":
                left_true, left_false = self.operand(left, states)
                right_true, right_false = self.operand(right, left_false)
                return left_true | right_true, right_false
            if operator in ("==", "!=", "<") and _text(right).strip() in ("0", "NULL", "false"):
                taken, not_taken = self.condition(left, states)
                return (not_taken, taken) if operator == "==" else (taken, not_taken)
        if kind == "number_literal" or (kind == "true" or kind == "false"):
            value = _text(node).strip() not in ("0", "false")
            return (states, set()) if value else (set(), states)
        tested = None
        if kind == "assignment_expression" and cparse.operator(node) == "=":
            states = self.expression(node, states)
            tested = self.tested.get(_text(node.child_by_field_name("left")))
        elif kind == "call_expression":
            states = self.expression(node, states)
            calls = self.function.calls_within(node)
            tested = calls[-1] if calls and calls[-1].node == node else None
        elif kind == "identifier":
            states = self.expression(node, states)   # an iterator head `while (net)` may carry a site
            tested = self.tested.get(_text(node))
        else:
            states = self.expression(node, states)
        taken, not_taken = states, states
        if kind == "binary_expression" and cparse.operator(node) in ("==", "!="):
            left = _unwrap(node.child_by_field_name("left"))
            right = _unwrap(node.child_by_field_name("right"))
            if left.type == "identifier" and right.type == "identifier" and not (
                    predicates.constant(_text(left)) or predicates.constant(_text(right))):
                # `if (ssk != prev_ssk)`
                same = cparse.operator(node) == "=="
                left, right = _text(left), _text(right)
                taken = {self.transfer.equal(state, left, right, same) for state in taken}
                not_taken = {self.transfer.equal(state, left, right, not same) for state in not_taken}
        if tested is not None:
            taken = {self.transfer.assume(state, tested, True) for state in taken}
            not_taken = {self.transfer.assume(state, tested, False) for state in not_taken}
        if kind in ("identifier", "field_expression"):
            text = squeeze(_text(node))
            taken = {self.transfer.test(state, text, True, self.function) for state in taken}
            not_taken = {self.transfer.test(state, text, False, self.function) for state in not_taken}
        return taken, not_taken

    def operand(self, node: tree_sitter.Node, states: set) -> tuple[set, set]:
        """condition() of one side of && or ||; a call-free side tags each outcome, so that each
        way through `if (write && !rtnl_trylock())` knows `write` later (`if (write) unlock`)."""
        taken, not_taken = self.condition(node, states)
        tag = self.read_tag(node)
        if tag is not None:
            text, truth = tag
            self.tag_texts.add(text)
            taken = {_tagged(state, text, truth) for state in taken}
            not_taken = {_tagged(state, text, not truth) for state in not_taken}
        return taken, not_taken


def _tag_of(function: Function, condition: tree_sitter.Node) -> tuple[str, bool] | None:
    """Walker.branch_tag() of a condition of function (once per node: every path and walk asks)."""
    tags = function.condition_tags
    if condition.id not in tags:
        tags[condition.id] = _read_tag(function, condition)
    return tags[condition.id]


def _read_tag(function: Function, condition: tree_sitter.Node) -> tuple[str, bool] | None:
    node, truth = _unwrap(condition), True
    while node.type == "unary_expression" and cparse.operator(node) == "!":
        node, truth = _unwrap(node.child_by_field_name("argument")), not truth
    stable = _stable_queries()
    if any(c.name not in stable and not _named_query(c.name) for c in function.calls_within(node)):
        return None
    text = squeeze(_text(node))
    if _SIDE_EFFECT.search(text):
        return None
    if node.type == "binary_expression" and cparse.operator(node) in _RELATIONAL:
        # a != b: not a == b; a >= b: not a < b; a <= b: not a > b
        left = squeeze(_text(node.child_by_field_name("left")))
        right = squeeze(_text(node.child_by_field_name("right")))
        operator = cparse.operator(node)
        zero = _truth_test(function, left, operator, right)
        if zero is not None:   # x != 0, x == NULL, u > 0 for an unsigned u: the test of x itself
            return zero[0], truth if zero[1] else not truth
        text, same = _relation(left, operator, right)
        truth = truth if same else not truth
    return text, truth


_ZERO = frozenset({"0", "NULL", "false"})
_UNSIGNED = re.compile(r"^(__)?u(8|16|32|64)$|^unsigned\b|^size_t$|^bool$")


def _truth_test(function: Function, left: str, operator: str, right: str) -> tuple[str, bool] | None:
    """(x, truth) when `left operator right` is a test of x's truth in C: x != 0 (true), x == 0 or
    x == NULL (false), and for a variable of unsigned type u > 0 (true), either side the zero:
    tagged as `x` and `!x` are, so the tests of one flag correlate however they are spelt."""
    if left in _ZERO and right not in _ZERO:
        left, right, operator = right, left, {"<": ">", ">": "<"}.get(operator, operator)
    if right not in _ZERO:
        return None
    if operator in ("==", "!="):
        return left, operator == "!="
    if operator == ">" and right == "0" and _UNSIGNED.match(function.types.get(left, "")):
        return left, True
    return None


@dataclass(frozen=True)
class _Readers:
    tested: frozenset     # texts something reads: tested, returned, parameters (and *parameter)
    retested: frozenset   # those read again after a test of them: tested twice, in a loop, ...


_READERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # Function -> _Readers
_READ = cparse.query("""
(if_statement condition: (_) @condition)
(while_statement condition: (_) @condition)
(do_statement condition: (_) @condition)
(for_statement condition: (_) @condition)
(goto_statement label: (_) @goto)
""")


def _readers(function: Function) -> _Readers:
    """What may read a branch tag in function (see Transfer): the tag texts of its conditions (and
    of the operands condition() reads: `!x`, `a && b`, `x == 0`), its returned texts, which the
    lock rules read at returns, and its parameters, which callers read in its exits. A test's
    own tag is read again when the text is tested twice, or in a loop, or anywhere when a goto
    jumps back to a label before it (the same test is walked again)."""
    found = _READERS.get(function)
    if found is not None:
        return found
    readers = set(function.params) | {"*" + param for param in function.params}
    # what locks.returned_text() reads at a return
    returned = {squeeze(_text(node.named_children[0])) for node in function.shapes.get("return", [])
                if node.named_child_count}
    # and whether a returned value is an errno (`if (ret < 0)`), which tells what the return reports
    readers |= returned | {f"{text}<0" for text in returned}
    conditions, gotos = [], []
    for match in cparse.matches(_READ, function.body):
        if "goto" in match:
            gotos.append(match["goto"][0])
        else:
            conditions.extend(match["condition"])
    labels = {_text(node.child_by_field_name("label")): node.start_byte
              for node in function.labels_and_returns[0] if node.child_by_field_name("label") is not None}
    backward = any(labels.get(_text(goto), goto.start_byte) < goto.start_byte for goto in gotos)
    tested, again = set(), set()
    pending = [(node, backward or in_loop(node, function.body)) for node in conditions]
    while pending:
        node, repeated = pending.pop()
        tag = _tag_of(function, node)
        if tag is not None:
            if repeated or tag[0] in tested:
                again.add(tag[0])
            tested.add(tag[0])
        node = _unwrap(node)
        operator = cparse.operator(node)
        if node.type == "unary_expression" and operator == "!":
            pending.append((node.child_by_field_name("argument"), repeated))
        elif node.type == "binary_expression" and operator in ("&&", "||", "==", "!=", "<"):
            pending.append((node.child_by_field_name("left"), repeated))
            if operator in ("&&", "||"):
                pending.append((node.child_by_field_name("right"), repeated))
    found = _READERS[function] = _Readers(frozenset(readers | tested), frozenset(readers | again))
    return found


def in_loop(node: tree_sitter.Node, body: tree_sitter.Node) -> bool:
    """A loop of the function whose body is `body` holds the node."""
    while node is not None and node != body:
        if node.type in LOOPS:
            return True
        node = node.parent
    return False


def _text(node: tree_sitter.Node) -> str:
    return node.text.decode("utf-8", "replace") if node.text is not None else ""


_ASSIGNMENTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # Function -> _assignments()


def _assignments(function: Function) -> dict[str, list[int]]:
    """variable -> the start bytes of the values assigned to it (`x = v`, `int x = v`, `x += v`),
    of its updates (`x++`) and of calls given its address (`foo(&x)`)."""
    found: dict[str, list[int]] = {}
    pending = [function.body]
    while pending:
        node = pending.pop()
        target = at = None
        if node.type == "assignment_expression":
            target, at = node.child_by_field_name("left"), node.child_by_field_name("right")
        elif node.type == "init_declarator":
            target, at = node.child_by_field_name("declarator"), node.child_by_field_name("value")
        elif node.type == "update_expression":
            target = at = node.child_by_field_name("argument")
        elif node.type == "pointer_expression" and node.children and node.children[0].type == "&":
            target = at = node.child_by_field_name("argument")
        if target is not None and at is not None and target.type == "identifier":
            found.setdefault(target.text.decode("utf-8", "replace"), []).append(at.start_byte)
        pending.extend(node.named_children)
    return found


def _branch_body(node: tree_sitter.Node) -> list[tree_sitter.Node]:
    """The statements of a conditional's first branch (without its test and its #else/#elif)."""
    test = {node.child_by_field_name(f) for f in ("condition", "name", "alternative")} - {None}
    return [child for child in node.named_children if child not in test]


def _cases(children: list[tree_sitter.Node]) -> list[tree_sitter.Node]:
    """A switch body's items with conditionals opened: the case labels of every branch, in order."""
    items = []
    for child in children:
        if child.type in _CONDITIONALS or child.type in ("preproc_else", "preproc_elif", "preproc_elifdef"):
            items.extend(_cases(_branch_body(child)))
            alternative = child.child_by_field_name("alternative")
            if alternative is not None:
                items.extend(_cases([alternative]))
        else:
            items.append(child)
    return items


def _bounded(states: set, transfer: Transfer, universe: frozenset) -> set:
    """At most MAX_STATES states. Paths are merged before any is dropped: branch tags are forgotten
    one condition at a time, first those that tell nothing (the same decisive facts whichever way
    the condition went, or tagged one way only), so that a tag that separates locked from unlocked
    paths (`if (frags) mutex_lock()`) outlives the many that only multiply paths; only then are
    states dropped, the same ones whatever the hash seed. `universe`: every tag the walk made."""
    if all(isinstance(state, frozenset) for state in states):
        tagged: dict[Hashable, set] = {}   # decisive facts -> the tags of the states that have them
        for state in states:
            tags = state & universe
            if tags:
                tagged.setdefault(transfer.decisive(state), set()).update(tags)
        cores: dict[tuple, set] = {}   # (text, truth) -> the decisive facts of the states tagged so
        for core, tags in tagged.items():
            for tag in tags:
                cores.setdefault((tag[1], tag[2]), set()).add(core)
        texts = sorted({text for text, _ in cores}, key=lambda text: (_separation(cores, text), text))
        if texts:
            states = _fewest_forgotten(states, texts)
        if len(states) <= MAX_STATES:
            return states
    return set(sorted(states, key=_state_order)[:MAX_STATES])


def _fewest_forgotten(states: set, texts: list[str]) -> set:
    """The states with the fewest of texts, taken in order, forgotten that leaves MAX_STATES or
    fewer (at least one text; all of them when even that leaves more). Forgetting more never adds
    states; one or two texts usually suffice, so the count is looked for by doubling, then halving.
    Each try starts from the largest count known not to fit (forgetting texts[:a] then texts[a:b]
    is forgetting texts[:b]), whose states are fewer and already merged."""
    done, base = 0, states    # texts[:done] forgotten in base; done is 0 or does not fit
    merged: dict[int, set] = {}

    def fits(count: int) -> bool:
        nonlocal done, base
        merged[count] = _forgetting(base, texts[done:count])
        if len(merged[count]) <= MAX_STATES:
            return True
        done, base = count, merged[count]
        return False

    low, high = 1, 1          # fits(high) or high is len(texts); low - 1 does not fit
    while high < len(texts) and not fits(high):
        low, high = high + 1, min(2 * high, len(texts))
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return merged[high] if high in merged else _forgetting(base, texts[done:high])


def _forgetting(states: set, texts: list[str]) -> set:
    forgotten = {tag for text in texts for tag in (("branch", text, True), ("branch", text, False), ("set", text))}
    return {state if forgotten.isdisjoint(state) else state - forgotten for state in states}


def _separation(cores: dict, text: str) -> float:
    """How well the condition `text` tells decisive facts apart: 0 when both ways reach the same
    ones (or one way is never tagged), 1 when none is reached both ways."""
    true, false = cores.get((text, True), set()), cores.get((text, False), set())
    if not true or not false:
        return 0.0
    return len(true ^ false) / len(true | false)


def _is_tag(fact) -> bool:
    return fact.__class__ is tuple and len(fact) == 3 and fact[0] == "branch"


@lru_cache(maxsize=1 << 16)
def _state_order(state: State) -> tuple:
    """A sort key for states that does not depend on set iteration order (hash seed). Cached: a
    set past MAX_STATES is cut at every statement, mostly the same states again."""
    return tuple(sorted(map(repr, state))) if isinstance(state, frozenset) else (repr(state),)


@lru_cache(maxsize=4096)
def _word(variable: str) -> re.Pattern:
    return re.compile(rf"\b{re.escape(variable)}\b")


def _comma_items(node: tree_sitter.Node) -> list[tree_sitter.Node]:
    items = []
    while node.type == "comma_expression":
        items.append(node.child_by_field_name("left"))
        node = node.child_by_field_name("right")
    return items + [node]


_RELATIONAL = ("<", ">", "<=", ">=", "==", "!=")
_NEGATION = {"!=": "==", ">=": "<", "<=": ">"}


def _relation(left: str, operator: str, right: str) -> tuple[str, bool]:
    """(text, truth) of `left operator right` in one form per comparison: `a >= b` is `a<b` false."""
    if operator in _NEGATION:
        return f"{left}{_NEGATION[operator]}{right}", False
    return f"{left}{operator}{right}", True


def _untagged(state: frozenset, text: str) -> frozenset:
    tags = {("branch", text, True), ("branch", text, False), ("set", text)}
    return state - tags if not tags.isdisjoint(state) else state


def _tagged(state: frozenset, text: str, truth: bool) -> frozenset:
    """state with ("branch", text, truth), unless a branch assigned it already (`held = true;`)."""
    if ("branch", text, not truth) in state or ("branch", text, truth) in state:
        return state
    return state | {("branch", text, truth)}


def _unwrap(node: tree_sitter.Node) -> tree_sitter.Node:
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node
