"""Genetlink doits run with what their family's pre_doit leaves held (the facts table's [genl]),
chosen by the op's internal flags. Fixtures of our own: fixtures/checks/genl/."""

from pathlib import Path

from patchbench.checks import engine

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checks" / "genl"
RULE = "rcu-deref-unprotected"


def reported(name: str) -> set[str]:
    path = FIXTURES / name
    return {f.function for f in engine.check_source(str(path), path.read_bytes(), {RULE})}


def test_a_doit_runs_under_the_lock_its_family_pre_doit_takes():
    # dl_get_doit -> dl_table_find under devl_lock() (the mutex devlink->lock the walk names);
    # the family without pre_doit holds nothing
    assert reported("devlink_like.c") == {"dl_table_find_bare"}


def test_the_op_internal_flags_choose_what_pre_doit_holds():
    # NL80211_FLAG_NEED_WIPHY: the wiphy mutex, the list's update side; with
    # NL80211_FLAG_NO_WIPHY_MTX nothing is held
    assert reported("nl80211_like.c") == {"unlocked_doit"}
