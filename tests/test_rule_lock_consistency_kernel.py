"""lock-held-inconsistent on real 7.2 code: our own mutations of networking files, each moving a
list or queue access out of the lock every other access of it holds (found, and nothing else from
this rule), and the same files unmutated (no finding)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchbench.checks.run import checkfile

RULE = "lock-held-inconsistent"

# name -> (path, [(old, new), ...] each `old` found exactly once, the function that must be reported)
MUTATIONS = {
    "ipmr_mfc_add walks the unresolved queue before taking its lock": (
        "net/ipv4/ipmr.c",
        [("\tfound = false;\n\tspin_lock_bh(&mfc_unres_lock);\n\tlist_for_each_entry(_uc, &mrt->mfc_unres_queue, list) {\n"
          "\t\tuc = (struct mfc_cache *)_uc;",
          "\tfound = false;\n\tlist_for_each_entry(_uc, &mrt->mfc_unres_queue, list) {\n\t\tuc = (struct mfc_cache *)_uc;"),
         ("\t\t\tfound = true;\n\t\t\tbreak;\n\t\t}\n\t}\n\tif (list_empty(&mrt->mfc_unres_queue))",
          "\t\t\tfound = true;\n\t\t\tbreak;\n\t\t}\n\t}\n\tspin_lock_bh(&mfc_unres_lock);\n"
          "\tif (list_empty(&mrt->mfc_unres_queue))")],
        "ipmr_mfc_add"),
    "ip6mr_mfc_add walks the unresolved queue before taking its lock": (
        "net/ipv6/ip6mr.c",
        [("\tfound = false;\n\tspin_lock_bh(&mfc_unres_lock);\n\tlist_for_each_entry(_uc, &mrt->mfc_unres_queue, list) {\n"
          "\t\tuc = (struct mfc6_cache *)_uc;",
          "\tfound = false;\n\tlist_for_each_entry(_uc, &mrt->mfc_unres_queue, list) {\n\t\tuc = (struct mfc6_cache *)_uc;"),
         ("\t\t\tfound = true;\n\t\t\tbreak;\n\t\t}\n\t}\n\tif (list_empty(&mrt->mfc_unres_queue))",
          "\t\t\tfound = true;\n\t\t\tbreak;\n\t\t}\n\t}\n\tspin_lock_bh(&mfc_unres_lock);\n"
          "\tif (list_empty(&mrt->mfc_unres_queue))")],
        "ip6mr_mfc_add"),
    "the tp_meter receiver's shutdown timer frees unacked packets without unacked_lock": (
        "net/batman-adv/tp_meter.c",
        [("\tspin_lock_bh(&tp_vars->common.unacked_lock);\n\tlist_for_each_entry_safe(un, safe, &tp_vars->common.unacked_list, list) {",
          "\tlist_for_each_entry_safe(un, safe, &tp_vars->common.unacked_list, list) {"),
         ("\t\ttp_vars->common.unacked_count--;\n\t}\n\tspin_unlock_bh(&tp_vars->common.unacked_lock);\n",
          "\t\ttp_vars->common.unacked_count--;\n\t}\n")],
        "batadv_tp_receiver_shutdown"),
    "addrconf_dad_run walks the addresses without idev->lock": (
        "net/ipv6/addrconf.c",
        [("\tread_lock_bh(&idev->lock);\n\tlist_for_each_entry(ifp, &idev->addr_list, if_list) {\n\t\tspin_lock(&ifp->lock);",
          "\tlist_for_each_entry(ifp, &idev->addr_list, if_list) {\n\t\tspin_lock(&ifp->lock);"),
         ("\t\tspin_unlock(&ifp->lock);\n\t}\n\tread_unlock_bh(&idev->lock);\n}\n\n#ifdef CONFIG_PROC_FS",
          "\t\tspin_unlock(&ifp->lock);\n\t}\n}\n\n#ifdef CONFIG_PROC_FS")],
        "addrconf_dad_run"),
    "tipc_service_insert_publ looks for a duplicate before taking the service's lock": (
        "net/tipc/name_table.c",
        [("\tspin_lock_bh(&sc->lock);\n\tsr = tipc_service_create_range(sc, p);",
          "\tsr = tipc_service_create_range(sc, p);"),
         ("\t\t\tgoto exit;\n\t\t}\n\t}\n\n\tif (in_own_node(net, p->sk.node))",
          "\t\t\tgoto exit;\n\t\t}\n\t}\n\n\tspin_lock_bh(&sc->lock);\n\tif (in_own_node(net, p->sk.node))")],
        "tipc_service_insert_publ"),
    "the sctp address queue's timer walks it without addr_wq_lock": (
        "net/sctp/protocol.c",
        [("\tspin_lock_bh(&net->sctp.addr_wq_lock);\n\n\tlist_for_each_entry_safe(addrw, temp, &net->sctp.addr_waitq, list) {",
          "\tlist_for_each_entry_safe(addrw, temp, &net->sctp.addr_waitq, list) {"),
         ("#endif\n\t\tlist_del(&addrw->list);\n\t\tkfree(addrw);\n\t}\n\tspin_unlock_bh(&net->sctp.addr_wq_lock);\n",
          "#endif\n\t\tlist_del(&addrw->list);\n\t\tkfree(addrw);\n\t}\n")],
        "sctp_addr_wq_timeout_handler"),
}


def findings(path: str, source: bytes) -> list[tuple[str, str]]:
    return [(f.rule, f.function) for f in checkfile.check_source(path, source, {RULE})]


@pytest.mark.kernel
@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutated_72_file_is_found(kernel_tree_new: Path, name: str):
    path, edits, function = MUTATIONS[name]
    source = (kernel_tree_new / path).read_bytes()
    for old, new in edits:
        assert source.count(old.encode()) == 1, old
        source = source.replace(old.encode(), new.encode())
    # every finding is in the mutated function (one per field it left unlocked)
    found = findings(path, source)
    assert found and {name for _, name in found} == {function}


@pytest.mark.kernel
@pytest.mark.parametrize("path", sorted({path for path, _, _ in MUTATIONS.values()}))
def test_unmutated_72_file_has_no_finding(kernel_tree_new: Path, path: str):
    assert findings(path, (kernel_tree_new / path).read_bytes()) == []


FIXTURE_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "checks" / "lock_consistency"


def test_the_rule_runs_only_when_named(capsys):
    """Not a default rule (its whole-tree precision is not a default's): `lint` is silent on its
    fixtures unless --rules names it; an unknown name is bad input."""
    from patchbench.cli import main

    assert main(["lint", "--format", "terse", "--no-cache", str(FIXTURE_DIR)]) == 0
    assert capsys.readouterr().out.strip() == ""
    assert main(["lint", "--format", "terse", "--no-cache", "--rules", RULE, str(FIXTURE_DIR)]) == 1
    fixtures = sorted(FIXTURE_DIR.glob("*.c"))
    marked = sum(path.read_text().count(f"expect: {RULE}") for path in fixtures)
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(": ")[2] for line in lines] == [RULE] * marked and marked >= 3
    assert main(["lint", "--rules", RULE, str(FIXTURE_DIR)]) == 1
    assert f"Checked {len(fixtures)} C files, 1 rule in " in capsys.readouterr().out
    assert main(["lint", "--rules", "no-such-rule", str(FIXTURE_DIR)]) == 2
    assert capsys.readouterr().err.startswith("patchbench: error: --rules: unknown rule 'no-such-rule'")
