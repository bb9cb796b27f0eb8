; queue-stop-unmatched / queue-wake-wrong-queue: values given to locals, so that
; `txq = netdev_get_tx_queue(dev, q->id)` and `qnum = skb_get_queue_mapping(skb)` name the queue
; they were computed from. Run on one function body at a time.
(assignment_expression left: (identifier) @local operator: "=" right: (_) @value)
(init_declarator declarator: (identifier) @local value: (_) @value)
(init_declarator declarator: (pointer_declarator declarator: (identifier) @local) value: (_) @value)
