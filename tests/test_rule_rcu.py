"""The RCU rules on hand-written fixtures: every true positive found, every correct shape quiet."""

from pathlib import Path

import pytest

from patchbench.checks.run import checkfile

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checks" / "rcu"
RULES = {"rcu-deref-unprotected", "rcu-pointer-escapes"}
DEREF, ESCAPE = "rcu-deref-unprotected", "rcu-pointer-escapes"

# fixture -> expected findings: (rule, severity, function, a text unique to the flagged line).
EXPECTED = {
    "seed_escape.c": [
        (ESCAPE, "error", "demo_ring_consume_late_wake", "/* late wake */"),
        (ESCAPE, "error", "demo_flags_late", "/* read after unlock */"),
        (ESCAPE, "error", "demo_exit_paths", "/* quick path */"),
    ],
    "sections.c": [
        (DEREF, "error", "sec_relock_forgotten", "/* no section */"),
        (DEREF, "error", "sec_lock_one_branch", "/* unprotected when !want */"),
        (DEREF, "warning", "sec_wrong_flavour", "/* bh section, plain deref */"),
        (DEREF, "error", "sec_trace", "/* trace section */"),
        (DEREF, "warning", "sec_nested_later", "/* no known caller */"),
    ],
    "preconditions.c": [
        (DEREF, "error", "pre_caller_forgets", "/* outside the section */"),
        (DEREF, "error", "pre_no_section", "/* nobody locks */"),
    ],
    "contexts.c": [
        (DEREF, "warning", "ctx_select_queue", "/* select_queue */"),
        (DEREF, "warning", "ctx_poll_plain", "/* napi */"),
        (DEREF, "error", "ctx_work_fn", "/* process context */"),
    ],
    "iterators.c": [
        (DEREF, "error", "it_show", "/* bare iterator */"),
        (DEREF, "error", "it_nets", "/* bare net walk */"),
    ],
    "conventions.c": [
        (DEREF, "warning", "conv_reclaim_rcu", "/* callback read */"),
        (DEREF, "warning", "conv_forgets", "/* helper outside */"),
        (DEREF, "warning", "conv_unseen", "/* unseen helper */"),
    ],
    "registrations.c": [
        (DEREF, "error", "reg_work", "/* work without rtnl */"),
        (DEREF, "error", "reg_read", "/* file read */"),
        (DEREF, "error", "reg_scoped", "/* after scoped_guard */"),
        (DEREF, "warning", "reg_exported", "/* unknown entry */"),
    ],
    "protected.c": [
        (DEREF, "error", "upd_replace_unlocked", "/* unheld */"),
        (DEREF, "error", "upd_rtnl_dropped", "/* after rtnl_unlock */"),
        (DEREF, "error", "upd_access_deref", "/* access deref */"),
        (DEREF, "error", "upd_access_local", "/* via local */"),
        (DEREF, "warning", "upd_rtnl_plain", "/* plain under rtnl */"),
    ],
    "ways.c": [],
    # the NULL-check belief's fixture (tests/test_rule_null_belief.py): one tested reader nobody in
    # the file calls reads outside a section (no way in known: a warning)
    "null_belief.c": [
        (DEREF, "warning", "widget_is_up", "struct widget_dev *w = rcu_dereference(q->owner);"),
    ],
    "escape_repeats.c": [
        # no way in known (an exported function nobody here calls): a warning, and no lint finding
        (ESCAPE, "warning", "er_late_uses", "/* first late use */"),
    ],
    "update_side.c": [
        (ESCAPE, "warning", "us_peek_other_lock", "/* writer holds the spinlock */"),
    ],
}


def line_of(source: str, marker: str) -> int:
    lines = [i for i, text in enumerate(source.splitlines(), 1) if marker in text]
    assert len(lines) == 1, f"marker {marker!r} must be on exactly one line"
    return lines[0]


def test_every_fixture_has_expectations():
    assert {p.name for p in FIXTURES.glob("*.c")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_findings(name):
    path = FIXTURES / name
    source = path.read_text()
    found = checkfile.check_source(f"fixtures/checks/rcu/{name}", path.read_bytes(), RULES)
    got = {(f.rule, f.severity, f.function, f.line) for f in found}
    want = {(rule, severity, function, line_of(source, marker))
            for rule, severity, function, marker in EXPECTED[name]}
    assert got == want


def test_suppression_comment_silences_a_finding():
    source = (FIXTURES / "preconditions.c").read_bytes()
    found = checkfile.check_source("preconditions.c", source, RULES)
    assert not [f for f in found if f.function == "pre_suppressed"]
    unsuppressed = source.replace(b"patchbench: allow(rcu-deref-unprotected)", b"note:")
    found = checkfile.check_source("preconditions.c", unsuppressed, RULES)
    assert [f.rule for f in found if f.function == "pre_suppressed"] == [DEREF]


def test_reference_taken_inside_the_section_is_what_makes_the_late_use_safe():
    source = (FIXTURES / "seed_escape.c").read_bytes()
    without_hold = source.replace(b"\tdev_hold(dev);\n\trcu_read_unlock();", b"\trcu_read_unlock();")
    assert without_hold != source
    found = checkfile.check_source("seed_escape.c", without_hold, RULES)
    assert {(f.rule, f.function) for f in found if f.function == "demo_wake_with_hold"} == \
        {(ESCAPE, "demo_wake_with_hold")}


def test_messages_name_the_pointer_and_do_not_depend_on_lines():
    source = (FIXTURES / "seed_escape.c").read_bytes()
    before = checkfile.check_source("seed_escape.c", source, RULES)
    after = checkfile.check_source("seed_escape.c", b"\n\n\n" + source, RULES)
    assert [f.identity() for f in before] == [f.identity() for f in after]
    late = next(f for f in before if f.function == "demo_ring_consume_late_wake")
    assert "'dev'" in late.message and "rcu_dereference()" in late.message


# Correct shapes of the fixtures, and the edit that takes their protection away:
# (fixture, text, replacement, function then reported, rule).
UNPROTECTED = [
    ("seed_escape.c", "\tmutex_lock(&tfile->mutex);\n\trcu_read_lock();",
     "\trcu_read_lock();", "demo_under_mutex", ESCAPE),
    ("seed_escape.c", " && try_module_get(ops->owner))", ")", "demo_kick_ops", ESCAPE),
    # tun_get: with the reference taken inside, reading through the pointer afterwards is fine
    ("seed_escape.c", "\t\tdev_hold(tun->dev);\n\trcu_read_unlock();\n\n\treturn tun;",
     "\t\tdev_hold(tun->dev);\n\trcu_read_unlock();\n\n\treturn tun->dev ? tun : NULL;",
     "demo_get", None),
    ("sections.c", "\trcu_read_unlock();\n\tmight_sleep();\n\trcu_read_lock();\n\tnode = rcu_dereference",
     "\trcu_read_unlock();\n\tmight_sleep();\n\tnode = rcu_dereference", "sec_drop_and_retake", DEREF),
    # without its stated precondition the helper itself is reported: one caller holds no section
    ("preconditions.c", "/* Must be called with rcu_read_lock held. */\n", "", "pre_comment_above",
     DEREF),
    # the assert is redundant: the only caller holds the mutex
    ("protected.c", "\tlockdep_assert_held(&t->mutex);\n", "", "upd_peek_locked", None),
    ("protected.c", "\tupd_lock(t);\n\told =", "\told =", "upd_replace_wrapped", DEREF),
    # each way in has one protection rcu_dereference_rtnl() accepts; take one away
    ("ways.c", "\trcu_read_lock();\n\tway_last = way_get(t)->v;\n\trcu_read_unlock();",
     "\tway_last = way_get(t)->v;", "way_get", DEREF),
    # a stated precondition, where the comment negated it
    ("ways.c", "May not be called with RCU read lock", "Must be called with RCU read lock",
     "way_calls_sleepy", DEREF),
    # no longer registered as a UDP encap handler: the entry is unknown
    ("ways.c", "cfg->encap_rcv = way_encap_rcv;", "cfg->priv = way_encap_rcv;", "way_encap_rcv", DEREF),
    # the kernel caller's rcu_read_lock() around a UDP encap handler covers a use after the
    # handler's own section; run from a work item instead (process context: no reader left after
    # the section), the use escapes
    ("ways.c", "\tcfg->encap_err_lookup = way_encap_err;", "\tINIT_WORK(NULL, way_encap_err);",
     "way_encap_err", ESCAPE),
    # run from a NAPI poll, BH stays off from the unlock to the use: consolidated RCU keeps the
    # object alive there and nothing reports it (latent: docs/truth.md), so no finding
    ("ways.c", "\tcfg->encap_err_lookup = way_encap_err;", "\tnetif_napi_add(NULL, NULL, way_encap_err);",
     "way_encap_err", None),
    # the function's own section, ended before the use, inside the classifier context's
    # rcu_read_lock_bh(): still covered; with no registration (no known context) the use escapes
    ("ways.c", "\tstruct way_obj *o = rcu_dereference_bh(tp->root);\n\n\tspin_lock(&way_fastmap_lock);\n"
     "\tspin_unlock(&way_fastmap_lock);",
     "\tstruct way_obj *o;\n\n\trcu_read_lock_bh();\n\to = rcu_dereference_bh(tp->root);\n"
     "\trcu_read_unlock_bh();", "way_classify", None),
    ("ways.c", "\tstruct way_obj *o = rcu_dereference_bh(tp->root);\n\n\tspin_lock(&way_fastmap_lock);\n"
     "\tspin_unlock(&way_fastmap_lock);\n\treturn o->v;\n}\n\nstatic struct tcf_proto_ops way_cls_ops = {\n"
     "\t.classify\t= way_classify,",
     "\tstruct way_obj *o;\n\n\trcu_read_lock_bh();\n\to = rcu_dereference_bh(tp->root);\n"
     "\trcu_read_unlock_bh();\n\treturn o->v;\n}\n\nstatic struct tcf_proto_ops way_cls_ops = {\n",
     "way_classify", ESCAPE),
    # the writer's lock (a spinlock) keeps the object alive; without it the late read escapes
    ("update_side.c", "\tspin_lock_bh(&priv->lock);\n\trcu_read_lock();", "\trcu_read_lock();",
     "us_peek_locked", ESCAPE),
    # the writer runs under RTNL by its registration (ndo_open): RTNL is the update side too
    ("update_side.c", "\t.ndo_open = us_open,\n", "", "us_stop", ESCAPE),
    ("contexts.c", "\ttimer_setup(&priv->timer, ctx_timer_fn, 0);\n",
     "\tINIT_WORK(&priv->work, ctx_timer_fn);\n", "ctx_timer_fn", DEREF),
]


@pytest.mark.parametrize("name,old,new,function,rule", UNPROTECTED,
                         ids=[f"{u[0]}:{u[3]}" for u in UNPROTECTED])
def test_correct_shape_depends_on_its_protection(name, old, new, function, rule):
    """Each quiet shape is quiet because of the protection it shows: take it away and the rule
    speaks (rule None: a change that keeps it correct, and quiet)."""
    source = (FIXTURES / name).read_bytes()
    edited = source.replace(old.encode(), new.encode())
    assert edited != source
    before = [f for f in checkfile.check_source(name, source, RULES) if f.function == function]
    after = [f for f in checkfile.check_source(name, edited, RULES) if f.function == function]
    assert before == []
    assert {f.rule for f in after} == ({rule} if rule else set())


def test_update_side_is_the_lock_the_file_writes_the_field_under():
    """us_peek_other_lock holds a mutex across its late read: not the spinlock cur is written
    under (by rcu_assign_pointer() or as its rcu_dereference_protected() condition says), so it
    is reported; with neither in the file, a mutex held counts as the update side, as before."""
    source = (FIXTURES / "update_side.c").read_bytes()
    protected = b"\told = rcu_dereference_protected(priv->cur, lockdep_is_held(&priv->lock));\n"
    write = b"\trcu_assign_pointer(priv->cur, new);\n"

    def reported(text: bytes) -> bool:
        return any(f.function == "us_peek_other_lock" and f.rule == ESCAPE
                   for f in checkfile.check_source("update_side.c", text, RULES))
    assert reported(source)
    assert reported(source.replace(protected, b"\told = NULL;\n"))            # the write says
    assert reported(source.replace(write, b""))                               # the condition says
    assert not reported(source.replace(protected, b"\told = NULL;\n").replace(write, b""))


def test_one_finding_per_escaping_value_naming_its_other_uses():
    """er_late_uses uses o on three lines after the section: one finding at the first, naming
    the other two; a patch adding a use is new for `check`, one removing a use is not."""
    from patchbench.checks.run.series import new_findings
    source = (FIXTURES / "escape_repeats.c").read_bytes()
    text = source.decode()
    found = [f for f in checkfile.check_source("escape_repeats.c", source, RULES) if f.rule == ESCAPE]
    assert len(found) == 1 and found[0].repeats == 2
    assert f"(also at lines {line_of(text, '(o->b);')}, {line_of(text, 'o->a + o->b')})" in found[0].message
    more = source.replace(b"\ter_report(o->b);\n", b"\ter_report(o->b);\n\ter_report(o->a * 2);\n")
    fewer = source.replace(b"\ter_report(o->b);\n", b"")
    shifted = source.replace(b"void er_report(int v);\n", b"void er_report(int v);\n\n\n")
    after = {name: [f for f in checkfile.check_source("escape_repeats.c", edited, RULES) if f.rule == ESCAPE]
             for name, edited in (("more", more), ("fewer", fewer), ("shifted", shifted))}
    assert new_findings(found, after["more"]) == after["more"]
    assert new_findings(found, after["fewer"]) == []
    assert new_findings(found, after["shifted"]) == []
    assert found[0].identity() == after["more"][0].identity() == after["fewer"][0].identity()
