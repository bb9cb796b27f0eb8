"""rcu-deref-null-unchecked: a pointer loaded from an RCU-protected field is dereferenced without a
NULL test, where the code stores NULL in that field and its other readers test what they load
(the code's own belief that the field may be NULL: analyses/rcu/nullness.py)."""

from __future__ import annotations

from typing import Iterable

from patchbench.checks.analyses import calling
from patchbench.checks.analyses.rcu import nullness
from patchbench.checks.engine import registry
from patchbench.checks.engine.finding import Finding, Place
from patchbench.checks.engine.model import FileModel

ID = "rcu-deref-null-unchecked"
SEVERITY = "error"
MESSAGE = ("a pointer loaded from an RCU-protected field that is set to NULL, and that its other "
           "readers test for NULL, is dereferenced without a test")

MESSAGES = {
    "same_file": "'{expression}' dereferences {field} from {primitive}() without a NULL test, but "
                 "{store}() sets {field} to NULL and the other readers of this file test it first "
                 "(as {reader}() does)",
    "tree": "'{expression}' dereferences {field} from {primitive}() without a NULL test, but "
            "{store}() sets {field} to NULL and its other readers in the tree test it first "
            "(as {reader}() does)",
    "tree_elsewhere": "'{expression}' dereferences {field} from {primitive}() without a NULL test, but "
                      "{store}() sets {field} to NULL and its other readers in the tree test it first "
                      "(as {reader}() in {reader_file} does)",
}

# a load primitive (rcu_dereference*, rtnl_dereference, srcu_dereference*) or an accessor of the
# file around one: every file it can report on names one
MENTIONS = (b"_dereference",)


def check(model: FileModel) -> Iterable[Finding]:
    module = registry.rule(ID)
    for verdict in nullness.verdicts(model):
        read = verdict.read
        node = read.use if read.use is not None else read.node
        severity = "error" if verdict.kind == "same_file" else "warning"
        store = f"{verdict.store}()" + (f" in {verdict.store_file}" if verdict.store_file else "")
        reader = f"{verdict.reader}()" + (f" in {verdict.reader_file}" if verdict.reader_file else
                                          f" at line {verdict.reader_line}")
        args = dict(expression=nullness.expression(model, read), field=read.key, primitive=read.primitive,
                    store=verdict.store, reader=verdict.reader)
        kind = verdict.kind
        if verdict.reader_file:
            kind = "tree_elsewhere"
            args["reader_file"] = verdict.reader_file
        yield registry.finding(
            module, model, node, read.function, kind, severity,
            related=Place(f"{verdict.reader}() tests {read.key}", verdict.reader_line)
            if verdict.reader_line else None,
            because=(f"{read.key} is set to NULL in {store} ({verdict.stores} NULL store(s) known)",
                     f"{verdict.tested} of its {verdict.tested + verdict.unchecked} other reads that test or "
                     f"dereference it test it for NULL first, as {reader} does (the belief needs at least "
                     f"{nullness.MIN_TESTED} and {nullness.MIN_SHARE:.0%})",
                     f"here the value of {read.primitive}() is dereferenced before any test of it",
                     *calling.explain(model, read.function)),
            **args)
