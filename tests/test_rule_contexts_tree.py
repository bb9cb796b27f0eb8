"""Calling contexts, lock wrappers and RCU needs that come from elsewhere in the tree (the call index).

A small tree of our own (fixtures/checks/tree/: Kbuild and MAINTAINERS mark its root) holds a
header with a lock wrapper and an RCU reader, files of exported RCU helpers, and files that
register and call them; `lint` builds the index of that tree."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchbench.checks import callindex
from patchbench.checks.run import checkfile
from patchbench.checks.engine.context import TreeContext
from patchbench.commands.lint import lint, lint_files
from tests.support.fixture_tree import isolated_copy
from tests.support.git_series import git

TREE = Path(__file__).resolve().parents[1] / "fixtures" / "checks" / "tree"


@pytest.fixture
def tree(tmp_path, monkeypatch) -> Path:
    return isolated_copy(TREE, tmp_path, monkeypatch)


def findings(tree: Path) -> set[tuple[str, str, str]]:
    return {(Path(f.file).name, f.function, f.rule) for f in lint([str(tree / "drivers")], jobs=1)}


def series_findings(tree: Path, name: str) -> list:
    """helpers.c's RCU findings as `check` sees them: the index active in series mode."""
    context = TreeContext(callindex.from_files(tree, 1), tree, series=True)
    source = (tree / "drivers" / name).read_bytes()
    return checkfile.check_source(str(tree / "drivers" / name), source, {"rcu-deref-unprotected"}, context=context)


def test_header_wrapper_is_a_lock(tree):
    assert {f for f in findings(tree) if f[2] == "lock-imbalance"} == {("user.c", "user_leaks_chan", "lock-imbalance")}


def test_a_callee_elsewhere_that_reads_under_its_callers_section_is_reported_where_a_path_lacks_it(tree):
    found = lint([str(tree / "drivers")], jobs=1)
    rcu = {(Path(f.file).name, f.function) for f in found if f.rule == "rcu-deref-unprotected"}
    # file operation and work items (known process context) calling an exported reader, a walker
    # one call further (ports.c), a list walker with nothing held and a header reader with no
    # section; not the callers holding a section, a mutex (the update side, for the list walk
    # too), BH (timer), nor those of callees reading under a lock or a lockdep condition of their
    # own; not the function nobody is known to call (lint: unknown entry)
    assert rcu == {("user.c", "user_reads_unlocked"), ("worker.c", "worker_fn"), ("worker.c", "worker_walk_fn"),
                   ("offload.c", "offload_work")}
    # lint of a tree: one finding per function lacking the section, naming its other reads
    messages = sorted(f.message for f in found if f.function == "worker_fn")
    assert messages == [
        "helper_total() needs an RCU read-side section and is called outside one "
        "(through ports_sum(), rcu_dereference() at drivers/ports.c:10) (also at line 22)"]
    # check keeps one per read (it shows those a patch adds)
    assert sorted(f.message for f in series_findings(tree, "worker.c") if f.function == "worker_fn") == [
        "helper_total() needs an RCU read-side section and is called outside one "
        "(through ports_sum(), rcu_dereference() at drivers/ports.c:10)",
        "wrap_cfg_weight() needs an RCU read-side section and is called outside one "
        "(rcu_dereference() at include/wrap.h:28)"]


def test_the_callee_need_is_checked_as_new_code_is_in_a_series(tree):
    found = {(f.function, f.severity) for f in series_findings(tree, "worker.c")}
    assert found == {("worker_fn", "error"), ("worker_walk_fn", "error"), ("worker_unknown_entry", "warning")}
    worker = tree / "drivers" / "worker.c"
    worker.write_text(worker.read_text().replace(
        "\tw->total = helper_total(w->priv);\n\tw->total += wrap_cfg_weight(w->priv);\n}",
        "\trcu_read_lock();\n\tw->total = helper_total(w->priv);\n"
        "\tw->total += wrap_cfg_weight(w->priv);\n\trcu_read_unlock();\n}", 1))
    assert {f for f, _ in {(f.function, f.severity) for f in series_findings(tree, "worker.c")}} == \
        {"worker_walk_fn", "worker_unknown_entry"}


def test_the_index_knows_which_functions_need_a_section_on_entry(tree):
    index = callindex.from_files(tree, 1)
    assert index.need_of("helper_total") == ("rcu_dereference", "drivers/ports.c", 10, "ports_sum")
    assert index.need_of("wrap_cfg_weight") == ("rcu_dereference", "include/wrap.h", 28, "")
    # a list walk with nothing held needs one too: its callers hold the section or the update side
    assert index.need_of("helper_walk") == ("list_for_each_entry_rcu", "drivers/ports.c", 20, "")
    for reads_under_its_own in ("helper_total_checked", "helper_total_locked", "worker_locked_fn"):
        assert index.need_of(reads_under_its_own) is None


def test_callers_in_other_files_give_the_entry(tree):
    found = {(f.function, f.severity) for f in series_findings(tree, "helpers.c")}
    # helper_reads: its only caller holds a section; the other helper has one caller without
    assert found == {("helper_needs_caller_section", "warning")}


def test_without_the_caller_section_elsewhere_the_exported_helper_is_reported(tree):
    user = tree / "drivers" / "user.c"
    user.write_text(user.read_text().replace("\trcu_read_lock();\n\tweight = helper_reads", "\tweight = helper_reads"))
    assert ("helper_reads", "warning") in {(f.function, f.severity) for f in series_findings(tree, "helpers.c")}
    # lint of the tree leaves it alone: the index reads other files lexically, its gaps are no evidence
    assert ("helpers.c", "helper_reads", "rcu-deref-unprotected") not in findings(tree)


def test_the_index_is_built_once_per_tree_content(tree):
    first = callindex.from_files(tree, 1)
    again = callindex.from_files(tree, 1)
    assert first.digest == again.digest
    assert again.wrapper_of("wrap_chan_lock") == [["chan"], [["mutex_lock_nested", "&chan->lock"]]]
    (tree / "drivers" / "user.c").write_text((tree / "drivers" / "user.c").read_text() + "\n")
    assert callindex.from_files(tree, 1).digest != first.digest


def test_a_checkout_is_indexed_from_git_as_from_its_files(tree):
    """In a git checkout the blob ids come from git's index; what is changed, untracked, linked
    or in a dot-directory must come out exactly as reading every file gives."""
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "tree")
    walked = callindex.from_files(tree, 1).digest
    (tree / "drivers" / "user.c").write_text((tree / "drivers" / "user.c").read_text() + "\n")
    (tree / "drivers" / "new.c").write_text("void new_one(void)\n{\n}\n")
    (tree / "drivers" / "linked.h").symlink_to("../include/wrap.h")
    (tree / ".hidden").mkdir()
    (tree / ".hidden" / "skipped.c").write_text("void skipped(void)\n{\n}\n")
    (tree / "tools").mkdir()   # git is asked for .c and .h files outside tools/ and the like only
    (tree / "tools" / "user_space.c").write_text("int main(void)\n{\n}\n")
    (tree / "drivers" / "notes.txt").write_text("not C\n")
    _, changed, listed = callindex.build._checkout(tree, lambda: None)
    from_git, _ = callindex.build._checkout_blobs(tree, changed, listed)
    assert sorted(from_git) == sorted(callindex.build._walked_blobs(tree))
    assert {"drivers/new.c", "drivers/linked.h"} <= {path for path, _ in from_git}
    assert callindex.from_files(tree, 1).digest != walked


def test_a_clean_checkout_seen_before_is_not_listed_again_and_a_staged_change_is_seen(tree):
    """The digest of a checkout whose files agree with git's index is noted by that index file's
    state: a staged change (the index rewritten, no file differing from it) gives a new digest."""
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "tree")
    first = callindex.from_files(tree, 1).digest
    note, changed, _ = callindex.build._checkout(tree, lambda: None)
    assert not changed and note.read_text() == first + "\n"
    assert callindex.from_files(tree, 1).digest == first
    (tree / "drivers" / "user.c").write_text((tree / "drivers" / "user.c").read_text() + "\n")
    git(tree, "add", "drivers/user.c")
    staged = callindex.from_files(tree, 1).digest
    assert staged != first
    shutil.rmtree(note.parent)   # nothing noted: listed and hashed from nothing, the same answer
    assert callindex.from_files(tree, 1).digest == staged
    # a symlink's target outside the tree is not in git's index: it is hashed again on each use
    outside = tree.parent / "outside.h"
    outside.write_text("void two(void);\n")
    (tree / "drivers" / "linked.h").symlink_to(outside)
    git(tree, "add", "drivers/linked.h")
    linked = callindex.from_files(tree, 1).digest
    assert linked != staged and callindex.from_files(tree, 1).digest == linked
    outside.write_text("void three(void);\n")   # git's index and the files agree; the target does not
    assert callindex.from_files(tree, 1).digest != linked


def test_no_index_means_unknown_callers_and_a_warning_that_says_so():
    source = (TREE / "drivers" / "helpers.c").read_bytes()
    found = [f for f in checkfile.check_source("helpers.c", source, {"rcu-deref-unprotected"})
             if f.function == "helper_reads"]
    assert [f.severity for f in found] == ["warning"]
    assert "what helper_reads() holds on entry is not established" in found[0].message


def test_a_call_through_an_ops_field_needs_what_any_implementation_needs(tree):
    """wrap_fill_path() calls dev->ops->wrap_fill(): path.c's implementation reads under its
    caller's section, plain.c's reads nothing; offload.c, which names no RCU primitive at all,
    calls it from a work item."""
    index = callindex.from_files(tree, 1)
    assert index.need_of("wrap_fill_path") == ("rcu_dereference", "drivers/path.c", 7, "wrap_fill")
    found = [f for f in lint([str(tree / "drivers")], jobs=1) if f.function == "offload_work"]
    assert [f.message for f in found] == [
        "wrap_fill_path() needs an RCU read-side section and is called outside one "
        "(through wrap_fill(), rcu_dereference() at drivers/path.c:7)"]


def test_a_guard_class_defined_in_a_header_holds_its_lock(tree):
    # include/guard_cfg.h: DEFINE_GUARD(gcfg, struct gcfg *, mutex_lock(&_T->mtx), ...): guard(gcfg)(c)
    # and scoped_guard(gcfg, c) hold c->mtx, so only the work item without the guard is reported
    found = lint([str(tree / "net")], jobs=1)
    assert {(f.function, f.rule) for f in found} == {("gcfg_bare_work", "rcu-deref-unprotected")}


def test_a_header_macro_walking_an_rcu_list_is_a_need_of_its_callers(tree):
    """lib/walker.c uses include/wrap_walk.h's for-each and accessor macros: a macro whose body
    reads with nothing held (no lockdep condition, no lock of its own, not variadic) passes its
    need to the functions calling it, as a function would; its loop head is judged like the
    list walk it expands to."""
    index = callindex.from_files(tree, 1)
    assert index.need_of("wrap_for_each_port") == ("list_for_each_entry_rcu", "include/wrap_walk.h", 13, "")
    assert index.need_of("wrap_table_cfg") == ("rcu_dereference", "include/wrap_walk.h", 20, "")
    assert index.need_of("wrap_for_each_port_locked") is None   # the walk names its lock
    assert index.need_of("wrap_for_each_port_cond") is None     # passes its caller's condition on
    found = {(f.function, f.line) for f in lint([str(tree / "lib")], jobs=1)
             if f.rule == "rcu-deref-unprotected" and Path(f.file).name == "walker.c"}
    # work items with nothing held, and the plain walk under the mutex (no reader: a lockdep
    # splat); not the walk in a section, nor in a timer (BH off), nor the ones naming the mutex
    assert found == {("walker_bare", 21), ("walker_locked", 47), ("walker_cfg", 57)}


def test_a_lookup_of_another_file_returns_what_only_the_callers_section_keeps_alive(tree):
    """lib/lookup.c's lookup_port() walks an RCU list itself and returns the entry it found,
    taking no reference: its result, got in a section of the caller's own, is tracked as
    rcu_dereference()'s is, so a use after the section is an escape (check). Not so for a lookup
    that takes a reference (lookup_port_get), nor for a use inside the section."""
    index = callindex.from_files(tree, 1)
    context = TreeContext(index, tree, series=True)
    path = tree / "lib" / "lookup_user.c"
    found = checkfile.check_source(str(path), path.read_bytes(), {"rcu-deref-unprotected", "rcu-pointer-escapes"},
                                   context=context)
    assert [(f.rule, f.function, f.line) for f in found] == [("rcu-pointer-escapes", "finder_late", 26)]
    assert "from lookup_port() inside the read-side section" in found[0].message


def test_a_list_built_only_by_an_export_every_caller_of_which_is_a_probe_is_not_a_race_to_walk(tree):
    """lib/fabric.c: the member list changes only in fabric_register(), exported and called in
    the tree only from drivers' probes (one directly, one through a helper), so the call index
    places the change before publication and the walk without the mutex is not reported; the
    spare list also changes in fabric_lend(), which a work item of another file calls, and its
    walk without the mutex is."""
    found = [f for f in lint_files([str(tree / "lib" / "fabric.c")], rule_ids=frozenset({"lock-held-inconsistent"}))]
    assert [(f.function, f.line) for f in found] == [("fabric_spare", 142)]
    assert "fabric.spares without fabric_mutex" in found[0].message


def test_a_call_of_another_file_taking_a_lock_the_caller_holds_is_a_self_deadlock(tree):
    """sound/pcfg_core.c's exported calls take the port's mutex or RTNL for themselves: the index
    records what each takes on every path and releases again, in terms of its parameters, and
    sound/pcfg_user.c calling one while holding that lock (the same port passed down, or RTNL;
    pcfg_register() takes RTNL with a killable lock whose failure returns) is
    reported at the call; not with the lock dropped, another port's lock, a trylock or a callee
    that takes it only when told."""
    index = callindex.from_files(tree, 1)
    assert index.acquires_of("pcfg_set_rate") == [["port", "rate"], [["mutex_lock", "&port->lock"]]]
    assert index.acquires_of("pcfg_commit") == [["port"], [["rtnl_lock", ""]]]
    assert index.acquires_of("pcfg_register") == [["port"], [["rtnl_lock_killable", ""]]]
    assert index.acquires_of("pcfg_try_rate") is None and index.acquires_of("pcfg_set_rate_locked") is None
    user = tree / "sound" / "pcfg_user.c"
    marked = {number for number, line in enumerate(user.read_text().splitlines(), 1) if "expect: lock-imbalance" in line}
    found = lint([str(tree / "sound")], jobs=1)
    assert {(Path(f.file).name, f.line) for f in found} == {("pcfg_user.c", number) for number in marked}
    assert sorted(f.message for f in found) == [
        "pcfg_commit() takes the lock card_apply() holds since rtnl_lock(): it deadlocks",
        "pcfg_register() takes the lock card_probe() holds since rtnl_lock(): it deadlocks",
        "pcfg_set_rate() takes the lock card_resume() holds since mutex_lock(&port->lock): it deadlocks"]


def test_an_open_calling_a_function_of_another_file_that_takes_rtnl_is_reported_by_check(tree):
    """sound/pcfg_netdev.c's .ndo_open (RTNL held by every way in, the facts table's calling
    context) returns pcfg_commit(), which takes RTNL itself. `check` reports it though the file
    names no lock; `lint` of the tree leaves existing code of unknown-to-it entry alone."""
    path = tree / "sound" / "pcfg_netdev.c"
    context = TreeContext(callindex.from_files(tree, 1), tree, series=True)
    found = checkfile.check_source(str(path), path.read_bytes(), {"lock-imbalance"}, context=context)
    line = next(number for number, text in enumerate(path.read_text().splitlines(), 1) if "pcfg_commit(port)" in text)
    assert [(f.line, f.message) for f in found] == [
        (line, "pcfg_commit() takes RTNL, which every way into pcfg_ndo_open() holds: it deadlocks")]
    assert not [f for f in lint([str(path)], jobs=1) if f.rule == "lock-imbalance"]


def test_a_header_accessor_rtnl_also_satisfies_is_a_need_of_callers_holding_neither(tree):
    """lib/cfg_user.c calls include/wrap_walk.h's wrap_table_cfg_rtnl() (rcu_dereference_rtnl())
    from work items: `check` reports the one holding neither a reader nor RTNL; `lint` of the
    tree leaves such needs read from afar alone (docs/rules.md, the call index)."""
    index = callindex.from_files(tree, 1)
    assert index.need_of("wrap_table_cfg_rtnl")[:2] == ("rcu_dereference_rtnl", "include/wrap_walk.h")
    path = tree / "lib" / "cfg_user.c"
    context = TreeContext(index, tree, series=True)
    found = checkfile.check_source(str(path), path.read_bytes(), {"rcu-deref-unprotected"}, context=context)
    assert [f.function for f in found] == ["cfg_user_bare"]
    assert not [f for f in lint([str(path)], jobs=1) if f.rule == "rcu-deref-unprotected"]


def test_a_walk_from_afar_under_rtnl_alone_is_a_lockdep_warning(tree):
    """lib/port_count.c's work items walk include/wrap_walk.h's port list: under RTNL alone the
    walk names no condition, so lockdep reports it (a warning: RTNL keeps the ports alive); in a
    section, through the RTNL-named accessor under RTNL, or through the walk naming the mutex
    held, nothing. `lint` and `check` agree."""
    path = tree / "lib" / "port_count.c"
    for series in (True, False):
        context = TreeContext(callindex.from_files(tree, 1), tree, series=series)
        found = checkfile.check_source(str(path), path.read_bytes(), {"rcu-deref-unprotected"}, context=context)
        assert [(f.function, f.severity) for f in found] == [("port_count_rtnl", "warning")]
        assert found[0].message.startswith("wrap_for_each_port() needs an RCU read-side section and is "
                                           "called under RTNL only")


def test_a_lock_wrapper_macro_of_a_header_takes_its_lock(tree):
    """include/pcfg.h's pcfg_port_lock() and pcfg_port_unlock() are macros around the port's
    mutex: the index records them as wrappers, as it does functions, so block/pcfg_scan.c's
    early return with the port locked is reported and its balanced twin is not."""
    index = callindex.from_files(tree, 1)
    assert index.wrapper_of("pcfg_port_lock") == [["p"], [["mutex_lock", "&(p)->lock"]]]
    assert index.wrapper_of("pcfg_port_unlock") == [["p"], [["mutex_unlock", "&(p)->lock"]]]
    found = lint([str(tree / "block")], jobs=1)
    assert [(f.function, f.rule, f.message) for f in found] == [
        ("pcfg_scan_rate", "lock-imbalance",
         "pcfg_port_lock(port) taken in pcfg_scan_rate() is still held at this return (released on other paths)")]
