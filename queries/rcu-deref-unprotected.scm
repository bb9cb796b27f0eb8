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

