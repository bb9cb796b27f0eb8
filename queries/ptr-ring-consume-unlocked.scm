; ptr-ring-consume-unlocked: the lockless consumer-side primitives of ptr_ring and skb_array.
; They need the ring's consumer_lock; the self-locking wrappers (ptr_ring_consume, ...) are not
; matched. @op is the callee name, @call the whole call.

((call_expression
   function: (identifier) @op) @call
 (#match? @op "^__ptr_ring_(consume|consume_batched|peek|discard_one|consume_created_space|will_invalidate|empty)$|^__skb_array_(consume|peek|empty)$"))

; Whether the file resizes rings: then __ptr_ring_empty() is not safe without the lock either.
((call_expression
   function: (identifier) @resize) @resize_call
 (#match? @resize "^(ptr_ring_resize|ptr_ring_resize_multiple|skb_array_resize|skb_array_resize_multiple)(_bh|_noprof)?$"))
