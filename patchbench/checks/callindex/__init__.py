"""The call index: who calls each function across the whole tree, and what is held at each call.

Built once per base from a lexical scan of every C file and header (no parse: a whole tree in
about a minute on two cores), each file's scan cached by its git blob id, the merged index by the
digest of all of them. Kernel style makes the scan reliable enough: a definition's `{` and `}`
sit in column 0; inside a body, `name(` is a call; the readers and RTNL held at a call are those
taken before it and not released before it (a release followed by return/goto/break in the same
block is an early exit that leaves the main path holding them).

    index = callindex.build(root)            # or from_git(repo, commit); cached
    context = TreeContext(index, root)       # passed with each file checked (FileModel.context)

`TreeContext.entries(path, name)` gives the RCU analysis one entry contribution per way into a function that
files other than `path` provide: each call site (the readers and RTNL held there, plus what its
caller is known to hold on entry, two callers deep) and each registration (its calling context from
the kernel facts table). No way at all gives [UNKNOWN_WAY].

`need(name)` says whether a function of another file or a header needs an RCU read-side section on
entry (it reads an RCU pointer with nothing of its own held, or calls such a function, directly or
through an ops field, with nothing held): the RCU analysis judges a call of it like a dereference.

The package, bottom up: scan (one file), store (scans and indexes on disk), index (the merged
index and the ways into a function), build (an index of a tree).
"""

from patchbench.checks.callindex.build import from_files, from_git, indexed, tree_root
from patchbench.checks.callindex.index import CallIndex
from patchbench.checks.callindex.scan import integer_defines, local_includes, scan

__all__ = ["CallIndex", "from_files", "from_git", "indexed", "integer_defines", "local_includes", "scan", "tree_root"]
