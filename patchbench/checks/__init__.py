"""Stage 4: tree-sitter analysis of kernel C, one rule module each, findings by identity.

The layers, bottom up; a module imports only from its own layer and those below it
(tests/test_checks_layers.py holds every import to this):

    kernel/     the kernel facts table (facts.toml) and its reader (facts.py): every kernel name
                the checker knows, and why
    engine/     parse (pre-pass + tree-sitter-c, queries from queries/*.scm), model (FileModel:
                functions, calls, aliases, registrations), flow (a path-sensitive walk of one body),
                predicates, summaries (fixpoints over a file's call graph), finding (findings as
                data), context (what the rest of the tree says, passed in with each file),
                registry (the rules and the finding builder), pool (forked workers), blob_store
    callindex/  the tree index: scan (one file), store, index (callers and ways in), build
    analyses/   locks, lock_balance, ptr_ring, rcu/ and queue/: what holds where, as verdicts
    rules/      one thin module per rule: ID, SEVERITY, MESSAGES, check(model)
    run/        checkfile (the rules on one file, suppressions), cache (findings by blob id),
                series (findings new in each applied patch)
"""
