"""The two conventions the RCU rules read from names and prose, each a named entry of the facts
table: [rcu.helpers] (a callee named *_rcu needs its caller's section) and [rcu.prose] (a comment
states a calling contract no assert states). Each test here fails without its entry."""

from pathlib import Path

import pytest

from patchbench.checks.run import checkfile
from patchbench.checks.analyses.rcu import primitives as P

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checks" / "rcu"
RULES = {"rcu-deref-unprotected", "rcu-pointer-escapes"}
ABOVE = b"/* Must be called with rcu_read_lock held. */\n"


def _found(name: str, source: bytes) -> set[tuple[str, str, str]]:
    return {(f.rule, f.severity, f.function) for f in checkfile.check_source(name, source, RULES)}


def _conventions() -> list:
    return checkfile.check_source("conventions.c", (FIXTURES / "conventions.c").read_bytes(), RULES)


# -- [rcu.helpers] -------------------------------------------------------------------------------

@pytest.mark.parametrize("name,helper", [
    ("dev_get_by_index_rcu", True), ("dev_get_by_name_rcu", True), ("in6_dev_rcu", True),
    ("list_add_rcu", False), ("__hlist_del_rcu", False), ("call_rcu", False), ("kfree_rcu", False),
    ("rb_link_node_rcu", False), ("foo_free_rcu", False), ("sk_nulls_add_node_rcu", False),
    # words, not substrings: "rcu" is the last word, never a part of one
    ("thread_circu", False), ("dev_get_rcu_locked", False), ("rcu", False),
])
def test_helper_names_are_read_as_words(name, helper):
    assert P.named_helper(name) is helper


def test_a_named_helper_of_the_file_is_judged_by_its_body_and_ways_in():
    """conv_lookup_rcu() reads with no section of its own: its caller outside one is reported,
    not the helper. conv_count_rcu() reads nothing RCU protects: no need, whatever its name.
    conv_reclaim_rcu() is handed to call_rcu(): its read is judged in its callback context."""
    found = {(f.function, f.severity) for f in _conventions()}
    assert found == {("conv_forgets", "warning"), ("conv_unseen", "warning"),
                     ("conv_reclaim_rcu", "warning")}


def test_a_finding_resting_on_the_name_alone_says_so():
    by_function = {f.function: f.message for f in _conventions()}
    assert "its body unread" in by_function["conv_unseen"]
    assert "its body unread" not in by_function["conv_forgets"]


def test_without_the_helper_convention(monkeypatch):
    """Without [rcu.helpers] the unseen lookup's caller goes unreported, and the helper of the
    file is blamed for its caller's missing section."""
    monkeypatch.setitem(P._HELPERS, "last_word", "no such word")
    found = {f.function for f in _conventions()}
    assert "conv_unseen" not in found and "conv_forgets" not in found
    assert "conv_lookup_rcu" in found


# -- [rcu.prose] ---------------------------------------------------------------------------------

# Rewordings that keep "callers hold a read-side section": the verdict stays.
SAME_MEANING = [
    b"/* Caller must hold rcu_read_lock(). */\n",
    b"/* Callers hold the RCU read lock. */\n",
    b"/* The RCU read lock must be held by the caller. */\n",
    b"/* Context: invoked under RCU read-side protection. */\n",
    b"/**\n * pre_comment_above - the active port's priority\n * @bond: the bond\n *\n"
    b" * Must be called from an RCU critical section.\n */\n",
]
# Rewordings that say the opposite: the helper itself is then reported, as with no comment.
OPPOSITE = [
    b"/* May be called without rcu_read_lock held. */\n",
    b"/* Must not be called with the RCU read lock held. */\n",
    b"/* Callers don't hold rcu_read_lock(). */\n",
    b"/* Frees the old port after an RCU grace period. */\n",
]


def _preconditions(comment: bytes) -> set:
    source = (FIXTURES / "preconditions.c").read_bytes()
    assert ABOVE in source
    return _found("preconditions.c", source.replace(ABOVE, comment))


@pytest.mark.parametrize("comment", SAME_MEANING)
def test_rewording_a_precondition_keeps_its_verdict(comment):
    assert _preconditions(comment) == _preconditions(ABOVE)
    assert not any(f[2] == "pre_comment_above" for f in _preconditions(comment))


@pytest.mark.parametrize("comment", OPPOSITE)
def test_a_negated_or_unrelated_comment_states_no_precondition(comment):
    assert _preconditions(comment) == _preconditions(b"")
    assert any(f[2] == "pre_comment_above" for f in _preconditions(comment))


def test_without_the_prose_entry(monkeypatch):
    """With no contract words, the stated precondition is gone: the helper is reported."""
    monkeypatch.setitem(P._PROSE, "contract", [])
    monkeypatch.setitem(P._PROSE, "after", [])
    assert any(f[2] == "pre_comment_above" for f in _preconditions(ABOVE))


@pytest.mark.parametrize("text,holder,stated", [
    ("Caller must hold RTNL.", "rtnl", True),
    ("RTNL must be held.", "rtnl", True),
    ("Called with rtnl_lock held", "rtnl", True),
    ("Does not hold RTNL: takes it itself.", "rtnl", False),
    ("Reads it with rcu_dereference_bh().", "rcu", False),
    ("Queued with call_rcu().", "rcu", False),
])
def test_prose_holders(text, holder, stated):
    assert P.states(text, holder) is stated


def test_a_precondition_naming_an_alternative():
    assert P.names_alternative("Called with the table's mutex or RCU read lock.", "rcu")
    assert P.names_alternative("Caller must hold either RCU or RTNL.", "rcu")
    assert not P.names_alternative("Called with RCU read lock. Or not at all.", "rcu")
    assert not P.names_alternative("Called with RCU read lock held.", "rcu")
