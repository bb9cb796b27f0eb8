; rcu-deref-unprotected: rcu_access_pointer() gives a value to compare, never to dereference.
; (The dereference primitives themselves are looked up by name among the model's call sites,
; in the table of patchbench/checks/rules/rcu_primitives.py.)

((field_expression
   argument: (call_expression function: (identifier) @access) @call
   operator: "->")
 (#eq? @access "rcu_access_pointer"))

((pointer_expression
   operator: "*"
   argument: (call_expression function: (identifier) @access) @call)
 (#eq? @access "rcu_access_pointer"))

; Loops: the pre-pass turns RCU list iterators (`hlist_for_each_entry_rcu(e, head, link) {`) into
; `while (e, head, link) {`; the analysis keeps those whose original text names an _rcu iterator.
(while_statement condition: (parenthesized_expression) @iterator)
