; lock-imbalance: calls that take a lock. What each spelling does (acquire, trylock, which
; argument names the lock) is the table in patchbench/checks/locks.py; this query only finds the
; functions worth walking. @op is the callee name, @call the whole call.

((call_expression
   function: (identifier) @op) @call
 (#match? @op "^(raw_)?spin_(lock|trylock)(_bh|_irq|_irqsave|_nested|_irqsave_nested|_bh_nested)?$|^(read|write)_(lock|trylock)(_bh|_irq|_irqsave)?$|^mutex_(lock|trylock|lock_nested|lock_io|lock_interruptible|lock_killable)$|^down_(read|write)(_trylock|_killable)?$|^rcu_read_lock(_bh|_sched)?$|^rtnl_(lock|trylock)$|^(bh_)?lock_sock$|^__?netif_tx_(lock|trylock)(_bh)?$"))

; guard(spinlock)(&l): a scope-bound lock
((call_expression
   function: (call_expression function: (identifier) @op)) @call
 (#eq? @op "guard"))
