"""What the RCU rules know about kernel primitives, as data (no rule here: no ID, no check).

Families of facts a program point can hold:
- readers: "rcu" (rcu_read_lock), "rcu_bh", "rcu_sched" (the explicit flavours), "trace"
  (rcu_read_lock_trace, valid for nothing below), "srcu", and the implicit readers "bh"
  (local_bh_disable, spin_lock_bh, softirq), "irq" (irqs off, hardirq), "preempt"
  (preempt_disable), "spin" (a spinlock held: preemption off);
- "rtnl", and ("lock", key) for a named spinlock or mutex.

Since the 5.0 flavour consolidation every reader family keeps an RCU-protected object alive, but
lockdep (PROVE_RCU) only accepts the flavour a primitive names: that difference is reported as a
"lockdep splat" warning rather than an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Families that keep RCU-protected memory alive (memory safety, used by rcu-pointer-escapes);
# "any" is some reader on every way in, not the same one (a callee of an rcu_read_lock() caller
# and of a local_bh_disable() one).
READERS = frozenset({"rcu", "rcu_bh", "rcu_sched", "bh", "irq", "preempt", "spin", "any"})
# Readers that keep a value read inside a section valid: not a held spinlock (not a reader
# under PREEMPT_RT, and reviewers ask for the rcu_read_unlock() to stay after the last use).
KEEPS_ALIVE = READERS - {"spin"}
# The sections a tracked value must be read in: the function's own explicit read-side sections
# (a value read under a spinlock is the update side's, not a reader's).
READ_SECTIONS = frozenset({"rcu", "rcu_bh", "rcu_sched", "srcu"})
# Families dropped from an assumed (unknown-caller) entry when the function opens or closes its
# own read-side section of a flavour: it would not, were its callers already inside one. A
# plain rcu_read_lock() says its callers may be anywhere; rcu_read_lock_bh() only that BH was on
# (a receive path under its caller's rcu_read_lock() may still take it).
OWNS = {
    "rcu": frozenset({"rcu", "rcu_bh", "rcu_sched", "bh", "irq", "preempt"}),
    "rcu_bh": frozenset({"rcu_bh", "bh", "irq"}),
    "rcu_sched": frozenset({"rcu_sched", "preempt"}),
    "trace": frozenset({"trace"}),
}
ASSUMABLE = frozenset().union(*OWNS.values()) - {"trace"}


@dataclass(frozen=True)
class Need:
    """What a dereference primitive needs at its call site."""
    strict: frozenset          # families that satisfy it under lockdep
    weak: frozenset            # families that keep the object alive but splat under lockdep
    condition_arg: int | None  # index of a lockdep condition argument (_check, _protected)
    section: str               # how messages name the missing protection
    tracked: bool              # the result is only valid inside the section (escape tracking)
    update_side: bool = False  # RTNL or a mutex known held is accepted instead (callees, lists)


_PLAIN = frozenset({"rcu"})
_BH = frozenset({"rcu_bh", "bh", "irq"})
_SCHED = frozenset({"rcu_sched", "bh", "irq", "preempt", "spin"})
_ANY = READERS


def _need(strict, condition_arg=None, section="an rcu_read_lock() section", tracked=True) -> Need:
    return Need(frozenset(strict), _ANY - frozenset(strict), condition_arg, section, tracked)


DEREFERENCES: dict[str, Need] = {
    "rcu_dereference": _need(_PLAIN),
    "rcu_dereference_check": _need(_PLAIN, 1),
    "rcu_dereference_sk_user_data": _need(_PLAIN),
    "rcu_dereference_bh": _need(_BH, section="an rcu_read_lock_bh() or BH-disabled section"),
    "rcu_dereference_bh_check": _need(_BH, 1, "an rcu_read_lock_bh() or BH-disabled section"),
    "rcu_dereference_sched": _need(_SCHED, section="an rcu_read_lock_sched() or non-preemptible section"),
    "rcu_dereference_sched_check": _need(_SCHED, 1, "an rcu_read_lock_sched() or non-preemptible section"),
    "rcu_dereference_rtnl": _need(_PLAIN | {"rtnl"}, section="an rcu_read_lock() section or RTNL",
                                  tracked=False),
    "rcu_dereference_bh_rtnl": _need(_BH | {"rtnl"}, section="an rcu_read_lock_bh() section or RTNL",
                                     tracked=False),
    "rcu_dereference_protected": Need(frozenset(), frozenset(), 1, "the update-side lock", False),
    "rtnl_dereference": Need(frozenset({"rtnl"}), frozenset(), None, "RTNL", False),
    "srcu_dereference": Need(frozenset({"srcu"}), frozenset(), None, "an srcu_read_lock() section", True),
    "srcu_dereference_check": Need(frozenset({"srcu"}), frozenset(), 2, "an srcu_read_lock() section", True),
    # List accessors are checked only with PROVE_RCU_LIST: any reader is fine.
    "list_first_or_null_rcu": Need(_ANY, frozenset(), None, "an RCU read-side section", True),
    "list_next_or_null_rcu": Need(_ANY, frozenset(), None, "an RCU read-side section", True),
    "list_first_entry_or_null_rcu": Need(_ANY, frozenset(), None, "an RCU read-side section", True),
}
# rcu_dereference_raw*, rcu_access_pointer: nothing needed (rcu_access_pointer's result must not
# be dereferenced, see ACCESS).
ACCESS = "rcu_access_pointer"

# Helpers whose name says the caller must be in a section (dev_get_by_index_rcu, tap_dev_get_rcu);
# the RCU API itself and list mutators end in _rcu too and are excluded.
RCU_HELPER = re.compile(r"_rcu$")
NOT_HELPER = re.compile(r"^(rcu_|call_rcu|kfree_rcu|kvfree_rcu|synchronize_|list_|hlist_|hlists_|"
                        r"hash_|__list_|__hlist_|sk_nulls_|__sk_nulls_|hlist_nulls_|"
                        r"free_percpu_rcu|rcuref_|\w*_free_rcu$|\w*_destroy_rcu$|\w*_put_rcu$|"
                        r"\w*_release_rcu$|\w*_add_rcu$|\w*_del_rcu$|\w*_replace_rcu$|\w*_init_rcu$|"
                        r"\w*_insert_rcu$)")
# RTNL, the update-side lock of most netdev RCU data, is accepted for them too (__in6_dev_get,
# bond_option_active_slave_get_rcu under ndo_eth_ioctl).
HELPER_NEED = Need(_ANY | {"rtnl"}, frozenset(), None, "an RCU read-side section", True, True)


# Calls that open and close sections: name -> (family, +1 open / -1 close).
SECTIONS: dict[str, tuple[str, int]] = {
    "rcu_read_lock": ("rcu", 1), "rcu_read_unlock": ("rcu", -1),
    "rcu_read_lock_bh": ("rcu_bh", 1), "rcu_read_unlock_bh": ("rcu_bh", -1),
    "rcu_read_lock_sched": ("rcu_sched", 1), "rcu_read_unlock_sched": ("rcu_sched", -1),
    "rcu_read_lock_sched_notrace": ("rcu_sched", 1), "rcu_read_unlock_sched_notrace": ("rcu_sched", -1),
    "rcu_read_lock_trace": ("trace", 1), "rcu_read_unlock_trace": ("trace", -1),
    "srcu_read_lock": ("srcu", 1), "srcu_read_unlock": ("srcu", -1),
    "srcu_read_lock_fast": ("srcu", 1), "srcu_read_unlock_fast": ("srcu", -1),
    "local_bh_disable": ("bh", 1), "local_bh_enable": ("bh", -1),
    "preempt_disable": ("preempt", 1), "preempt_enable": ("preempt", -1),
    "preempt_disable_notrace": ("preempt", 1), "preempt_enable_notrace": ("preempt", -1),
    "get_cpu": ("preempt", 1), "put_cpu": ("preempt", -1),
    "local_irq_disable": ("irq", 1), "local_irq_enable": ("irq", -1),
    "local_irq_save": ("irq", 1), "local_irq_restore": ("irq", -1),
    "rtnl_lock": ("rtnl", 1), "rtnl_unlock": ("rtnl", -1),
    "rtnl_trylock": ("rtnl", 0),   # 0: taken only when the call returns nonzero
}
# The explicit read-side openers and closers: a function calling one manages its own sections.
EXPLICIT_SECTIONS = frozenset(name for name, (family, delta) in SECTIONS.items()
                              if family in ("rcu", "rcu_bh", "rcu_sched", "trace"))

# Named locks: spin/raw_spin/read/write lock variants, and mutexes.
LOCK_CALL = re.compile(r"^(?P<kind>raw_spin|spin|read|write|mutex)_(?P<op>lock|unlock|trylock)"
                       r"(?P<suffix>_bh|_irq|_irqsave|_irqrestore|_nested|_interruptible|"
                       r"_killable|_io|_bh_nested|_irqsave_nested)?$")
LOCK_SIDE_EFFECT = {"_bh": "bh", "_irq": "irq", "_irqsave": "irq", "_irqrestore": "irq",
                    "_bh_nested": "bh", "_irqsave_nested": "irq"}

# Preconditions stated by the function: comments, annotations, asserts.
PRECONDITION_COMMENT = re.compile(
    r"(called|invoked|must be called|caller must hold|hold(s|ing)?)\s.{0,30}rcu_read_lock|"
    r"under rcu(_| )read|with rcu_read_lock|rcu read[- ]side|rcu_read_lock\(\) held|"
    # "Caller must hold RCU or RTNL", "called from RCU-critical section", "protected by RCU",
    # "inside rcu_read_lock()"; not "after an RCU grace period", "rcu_head", "call_rcu()".
    r"\b(called|invoked|caller|callers|must|hold|holds|holding|held|with|under|within|inside|"
    r"from|protected by|locked by|responsible)\b[^.;:()]{0,40}?"
    r"\brcu(_read_lock\b|_read_\[un\]lock|[-_ ]?read[-_ ]?(side|lock)|"
    r"[- ]?(critical|protected|locked|lock|reader)|"
    r"\b(?![-_ ]?(grace|head|callback|primitive|assign|field|pointer|sync|free|walk|list|safe|"
    r"protection|manner|way|work|barrier|rules)))|"
    r"\brcu[_ ]read[_ ]lock(\(\))?\s+(is\s+|must\s+be\s+|needs\s+to\s+be\s+)?(held|hold)",
    re.I | re.S)
RTNL_COMMENT = re.compile(
    r"(rtnl|rtnl_lock|rtnl lock)(\(\))? (must be |is |should be )?held|(under|with|holding|hold(s)?) "
    r"(the )?(rtnl|rtnl_lock|rtnl lock)\b|caller.{0,20}\brtnl\b|protected by (the )?rtnl\b",
    re.I | re.S)
RCU_ASSERTS = frozenset({"rcu_read_lock_held", "rcu_read_lock_bh_held", "rcu_read_lock_sched_held",
                         "rcu_read_lock_any_held", "lockdep_assert_in_rcu_read_lock",
                         "lockdep_assert_in_rcu_reader", "RCU_LOCKDEP_WARN"})
RTNL_ASSERTS = frozenset({"ASSERT_RTNL", "lockdep_assert_rtnl_held", "rtnl_is_locked",
                          "lockdep_rtnl_is_held"})
LOCK_ASSERTS = frozenset({"lockdep_assert_held", "lockdep_assert_held_once",
                          "lockdep_assert_held_write", "lockdep_assert_held_read"})

# Entry-point contexts by registration kind (model.registrations): the families they provide.
# A function registered only with kinds listed here has a known context; others are unknown.
CONTEXTS: dict[str, frozenset] = {
    "rx_handler": frozenset({"rcu", "bh"}),
    "ndo_start_xmit": frozenset({"rcu_bh", "bh"}),
    "ndo_select_queue": frozenset({"rcu_bh", "bh"}),
    "ndo_xdp_xmit": frozenset({"bh"}),
    "napi_poll": frozenset({"bh"}),
    "timer": frozenset({"bh"}),
    "tasklet": frozenset({"bh"}),
    "rcu_callback": frozenset({"bh"}),
    "hrtimer": frozenset({"irq"}),
    "work": frozenset(),
    "kthread": frozenset(),
}
# ndo control operations called with RTNL held.
RTNL_NDOS = frozenset({
    "ndo_init", "ndo_uninit", "ndo_open", "ndo_stop", "ndo_set_mac_address", "ndo_change_mtu",
    "ndo_set_features", "ndo_fix_features", "ndo_bpf", "ndo_vlan_rx_add_vid",
    "ndo_vlan_rx_kill_vid", "ndo_add_slave", "ndo_del_slave", "ndo_eth_ioctl",
    "ndo_siocdevprivate", "ndo_do_ioctl", "ndo_change_carrier", "ndo_setup_tc",
    "ndo_set_vf_mac", "ndo_set_vf_vlan", "ndo_set_vf_rate", "ndo_set_vf_spoofchk",
    "ndo_set_vf_trust", "ndo_get_vf_config", "ndo_set_vf_link_state", "ndo_change_proto_down",
    "ndo_fdb_add", "ndo_fdb_del", "ndo_bridge_setlink", "ndo_bridge_dellink",
    "ndo_set_rx_headroom", "ndo_udp_tunnel_add", "ndo_udp_tunnel_del", "ndo_change_rx_flags",
})
CONTEXTS.update({name: frozenset({"rtnl"}) for name in RTNL_NDOS})

# Calls that take a reference on (or through) their argument: the pointer may outlive the section.
REFERENCE = re.compile(r"(^|_)(hold|get|take|tryget|grab|inc|inc_not_zero|get_unless_zero|"
                       r"get_maybe_zero|get_not_zero|try_get|ref)$|^(maybe_)?get_\w+$")
# Calls that read a pointer's value without dereferencing it.
NOT_A_USE = frozenset({"IS_ERR", "IS_ERR_OR_NULL", "PTR_ERR", "PTR_ERR_OR_ZERO", "ERR_CAST",
                       "WARN_ON", "WARN_ON_ONCE", "BUG_ON", "rcu_assign_pointer",
                       "RCU_INIT_POINTER", "rcu_access_pointer", "READ_ONCE", "WRITE_ONCE",
                       "hash_ptr", "kfree_rcu", "call_rcu", "sizeof"})
