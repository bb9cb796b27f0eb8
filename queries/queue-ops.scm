; queue-stop-unmatched / queue-wake-wrong-queue: every netdev tx queue stop, wake and start.
; What each spelling does (stop/wake/start, one queue or all, where its queue argument sits) is the
; table in patchbench/checks/rules/queue_sites.py; this query only finds the calls.
; @op is the callee name, @call the whole call.

((call_expression
   function: (identifier) @op) @call
 (#match? @op "^(netif_(tx_)?(stop|wake|start)_(queue|subqueue|all_queues)|netif_tx_disable|netif_device_(detach|attach)|__?netif_txq_(try_stop|maybe_stop|maybe_wake|completed_wake)|netif_subqueue_(try_stop|maybe_stop|completed_wake)|netif_txq_(try_stop|maybe_stop|maybe_wake|completed_wake))$"))
