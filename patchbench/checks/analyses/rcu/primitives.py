"""What the RCU rules know about kernel primitives, as the RCU analysis asks for it (no rule here:
no ID, no check). The names come from the kernel facts table (patchbench/checks/kernel/facts.toml,
read by kfacts); this module only derives the views the analysis uses, and keeps the patterns of
the comments that state a precondition in prose.

Families of facts a program point can hold:
- readers: "rcu" (rcu_read_lock), "rcu_bh", "rcu_sched" (the explicit flavours), "trace"
  (rcu_read_lock_trace, valid for nothing below), "srcu", and the implicit readers "bh"
  (local_bh_disable, spin_lock_bh, softirq), "irq" (irqs off, hardirq), "preempt"
  (preempt_disable), "spin" (a spinning lock held: preemption off);
- "rtnl", and ("lock", key) for a named lock.

Since the 5.0 flavour consolidation every reader family keeps an RCU-protected object alive, but
lockdep (PROVE_RCU) only accepts the flavour a primitive names: that difference is reported as a
"lockdep splat" warning rather than an error.
"""

from __future__ import annotations

import re

from patchbench.checks.kernel import facts as kfacts

Need = kfacts.Need
# Families that keep RCU-protected memory alive (memory safety, used by rcu-pointer-escapes);
# "any" is some reader on every way in, not the same one (a callee of an rcu_read_lock() caller
# and of a local_bh_disable() one).
READERS = kfacts.readers()
# Readers that keep a value read inside a section valid: not a held spinlock (not a reader
# under PREEMPT_RT, and reviewers ask for the rcu_read_unlock() to stay after the last use).
KEEPS_ALIVE = READERS - {"spin"}
# The sections a tracked value must be read in: the function's own explicit read-side sections.
READ_SECTIONS = kfacts.names("rcu", "read_sections")
DEREFERENCES = kfacts.dereferences()
ACCESS = kfacts.table()["rcu"]["access"]
# Helpers whose name says the caller must be in a section (dev_get_by_index_rcu, tap_dev_get_rcu).
RCU_HELPER = re.compile(r"_rcu$")
NOT_HELPER = kfacts.not_rcu_helper()
HELPER_NEED = kfacts.helper_need()
# Calls that open and close sections: name -> (family, +1 open / -1 close / 0 try).
SECTIONS = kfacts.sections()
# The explicit read-side flavours.
EXPLICIT_FAMILIES = frozenset({"rcu", "rcu_bh", "rcu_sched", "trace"})


# Preconditions stated by the function: comments, annotations, asserts.
# A comment stating a precondition: each pattern below matches only text holding its word (in
# any case), so texts without the word are not searched.
PRECONDITION_WORD = "rcu"
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
RTNL_WORD = "rtnl"
RTNL_COMMENT = re.compile(
    r"(rtnl|rtnl_lock|rtnl lock)(\(\))? (must be |is |should be )?held|(under|with|holding|hold(s)?) "
    r"(the )?(rtnl|rtnl_lock|rtnl lock)\b|caller.{0,20}\brtnl\b|protected by (the )?rtnl\b",
    re.I | re.S)
RCU_ASSERTS = kfacts.names("rcu", "asserts", "reader")
RTNL_ASSERTS = kfacts.names("rcu", "asserts", "rtnl") | frozenset(
    name for name, op in kfacts.lock_ops().items() if op.action == "assert" and op.kind == "rtnl")
LOCK_ASSERTS = frozenset(name for name, op in kfacts.lock_ops().items()
                         if op.action == "assert" and op.key != "global")
# Calls that take a reference on (or through) their argument: the pointer may outlive the section.
REFERENCE = kfacts.reference_call()
# Calls that read a pointer's value without dereferencing it.
NOT_A_USE = kfacts.names("rcu", "reference", "not_a_use")
CONTAINER = kfacts.names("rcu", "reference", "container")
