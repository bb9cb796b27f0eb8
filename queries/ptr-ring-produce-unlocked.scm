; ptr-ring-produce-unlocked: the lockless producer-side primitives of ptr_ring and skb_array.
; They need the ring's producer_lock. @op is the callee name, @call the whole call.

((call_expression
   function: (identifier) @op) @call
 (#match? @op "^__ptr_ring_(produce|full)$|^__skb_array_(produce|full)$"))
