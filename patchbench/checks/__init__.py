"""Stage 4: tree-sitter analysis of kernel C, one rule module each, findings by identity.

    cparse     offset-preserving pre-pass + tree-sitter-c parse; queries loaded from queries/*.scm
    model      FileModel: functions, call sites, local aliases and types, registrations, call graph
    flow       path-sensitive walk of one body with a rule's Transfer (held-on-all-paths, exits)
    summaries  fixpoint of walks over the file's call graph (entry facts from callers, exit effects)
    locks      lock semantics as a Transfer, shared by the lock rules
    engine     rule discovery, suppression comments, check_source()
    facts      findings cached by git blob id; process pool for many files
    patches    a series: findings new in each applied patch
    rules/     one module per rule: ID, SEVERITY, MESSAGE, check(model)
"""
