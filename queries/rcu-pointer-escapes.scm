; rcu-pointer-escapes: pointer locals, and the places a pointer local is used.
; Used by patchbench/checks/rules/rcu_analysis.py; a use is judged by the state reaching it.

; Locals and parameters declared as pointers: `struct net_device *dev`.
(parameter_declaration declarator: (pointer_declarator) @pointer)
(declaration declarator: (pointer_declarator) @pointer)
(declaration declarator: (init_declarator declarator: (pointer_declarator) @pointer))

; Reads through a pointer: p->f, *p, p[i].
(field_expression argument: (identifier) @var operator: "->") @deref
(pointer_expression operator: "*" argument: (identifier) @var) @deref
(subscript_expression argument: (identifier) @var) @deref

; A pointer handed to a function, which reads through it (rcu_primitives.NOT_A_USE excepted).
(call_expression
  function: (_) @callee
  arguments: (argument_list (identifier) @var @pass))

; (A pointer merely returned is not a use: callers of lookups often hold the update-side lock,
; and the NULL it may be cannot be told apart here.)
