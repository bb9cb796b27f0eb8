"""Genetlink doits run with what their family's pre_doit leaves held (the facts table's [genl]),
chosen by the op's internal flags. Fixtures of our own: fixtures/checks/genl/."""

from pathlib import Path

from patchbench.checks.run import checkfile

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checks" / "genl"
RULE = "rcu-deref-unprotected"


def reported(name: str) -> set[str]:
    path = FIXTURES / name
    return {f.function for f in checkfile.check_source(str(path), path.read_bytes(), {RULE})}


def test_a_doit_runs_under_the_lock_its_family_pre_doit_takes():
    # dl_get_doit -> dl_table_find under devl_lock() (the mutex devlink->lock the walk names);
    # the family without pre_doit holds nothing
    assert reported("devlink_like.c") == {"dl_table_find_bare"}


def test_the_op_internal_flags_choose_what_pre_doit_holds():
    # NL80211_FLAG_NEED_WIPHY: the wiphy mutex, the list's update side; with
    # NL80211_FLAG_NO_WIPHY_MTX nothing is held
    assert reported("nl80211_like.c") == {"unlocked_doit"}


def test_a_pointer_in_a_private_stack_object_set_to_new_memory_needs_no_section():
    # rcu_access_pointer(h.blob)->len of a local struct the function filled with fresh memory,
    # before its address is taken: nothing else sees it. A copy of a shared object, or a read
    # after &h was handed on, is reported.
    assert reported("stack_object.c") == {"copy_shared", "published"}
