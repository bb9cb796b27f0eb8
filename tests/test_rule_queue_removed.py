"""queue-stop-unmatched on what a patch did to the wakes (`check` shows the rule the parent's text):
a completion path left releasing tx space without a wake, and a wake turned into a start.
Hand-written code of our own."""

from patchbench.checks.run import checkfile
from patchbench.checks.engine.model import FileModel

STOP = "queue-stop-unmatched"
PATCH_KINDS = ("this patch leaves", "replaces the")


def findings(old: str, new: str, previous: bool = True):
    model = FileModel.build("drivers/net/can/usb/demo.c", new.encode())
    model.previous = old.encode() if previous else None
    return [(f.function, f.severity) for f in checkfile.check_model(model, {STOP})
            if any(kind in f.message for kind in PATCH_KINDS)]


# a USB CAN-style driver: a few tx URBs in flight; the echo of a sent frame frees its slot and
# wakes; a failed transfer frees the slot in the write callback
USB = """
#define DEMO_TX_URBS 4

struct demo_ctx { struct demo_priv *priv; u32 echo_index; };
struct demo_priv {
	struct net_device *netdev;
	struct usb_device *udev;
	atomic_t active_tx_urbs;
	struct demo_ctx tx_contexts[DEMO_TX_URBS];
};

static void demo_free_ctx(struct demo_priv *priv, struct demo_ctx *ctx)
{
	ctx->echo_index = DEMO_TX_URBS;
	atomic_dec(&priv->active_tx_urbs);
}

static void demo_write_bulk_callback(struct urb *urb)
{
	struct demo_ctx *ctx = urb->context;
	struct demo_priv *priv = ctx->priv;
	struct net_device *netdev = priv->netdev;

	usb_free_coherent(urb->dev, urb->transfer_buffer_length, urb->transfer_buffer, urb->transfer_dma);
	if (!urb->status)
		return;

	netdev->stats.tx_errors++;
	can_free_echo_skb(netdev, ctx->echo_index, NULL);
	demo_free_ctx(priv, ctx);
%s
}

static void demo_read_bulk_callback(struct urb *urb)
{
	struct demo_priv *priv = urb->context;
	struct demo_ctx *ctx = &priv->tx_contexts[0];

	can_get_echo_skb(priv->netdev, ctx->echo_index, NULL);
	demo_free_ctx(priv, ctx);
	netif_wake_queue(priv->netdev);
	usb_submit_urb(urb, GFP_ATOMIC);
}

static netdev_tx_t demo_start_xmit(struct sk_buff *skb, struct net_device *netdev)
{
	struct demo_priv *priv = netdev_priv(netdev);
	struct demo_ctx *ctx = &priv->tx_contexts[0];
	struct urb *urb = usb_alloc_urb(0, GFP_ATOMIC);

	usb_fill_bulk_urb(urb, priv->udev, usb_sndbulkpipe(priv->udev, 2), skb->data, skb->len,
			  demo_write_bulk_callback, ctx);
	can_put_echo_skb(skb, netdev, ctx->echo_index, 0);
	if (atomic_inc_return(&priv->active_tx_urbs) >= DEMO_TX_URBS)
		netif_stop_queue(netdev);
	if (usb_submit_urb(urb, GFP_ATOMIC)) {
		can_free_echo_skb(netdev, ctx->echo_index, NULL);
		demo_free_ctx(priv, ctx);
		netif_wake_queue(netdev);
	}
	usb_free_urb(urb);
	return NETDEV_TX_OK;
}

static const struct net_device_ops demo_ops = {
	.ndo_start_xmit = demo_start_xmit,
};

static int demo_probe(struct usb_interface *intf, const struct usb_device_id *id)
{
	struct demo_priv *priv = usb_get_intfdata(intf);

	usb_fill_bulk_urb(priv->rx_urb, priv->udev, usb_rcvbulkpipe(priv->udev, 1), priv->buf, 64,
			  demo_read_bulk_callback, priv);
	return 0;
}
"""

WAKES = "\tnetif_wake_queue(netdev);"
ONLY_SOME_CONFIGS = "#ifdef CONFIG_DEMO_RECOVERY\n\tnetif_wake_queue(netdev);\n#endif"


def test_failed_transfer_freed_without_wake():
    found = findings(USB % WAKES, USB % "")
    assert found == [("demo_write_bulk_callback", "error")]
    # the fix that puts the wake back, the same code linted, and an unrelated patch: silent
    assert findings(USB % "", USB % WAKES) == []
    assert findings(USB % "", USB % "", previous=False) == []
    assert findings(USB % "/* unrelated */", USB % "") == []


def test_remaining_wake_only_in_some_configurations():
    assert findings(USB % WAKES, USB % ONLY_SOME_CONFIGS) == [("demo_write_bulk_callback", "error")]


def test_wake_kept_behind_running_test():
    # the patch keeps the wake but only for a stopped queue: a queue tested running needs none
    conditional = "\tif (netif_queue_stopped(netdev))\n\t\tnetif_wake_queue(netdev);"
    assert findings(USB % (WAKES + "\n" + WAKES), USB % conditional) == []


# a NAPI completion freeing the whole ring; a link-up callback restarting the queue
RING = """
struct demo_ring { struct net_device *dev; unsigned int head, tail; struct sk_buff *skbs[64]; };

static unsigned int demo_room(struct demo_ring *ring)
{
	return 64 - (ring->head - ring->tail);
}

static int demo_poll(struct napi_struct *napi, int budget)
{
	struct demo_ring *ring = container_of(napi, struct demo_ring, napi);

	while (ring->tail != ring->head)
		napi_consume_skb(ring->skbs[ring->tail++ & 63], budget);
%s
	napi_complete(napi);
	return 0;
}

static netdev_tx_t demo_xmit(struct sk_buff *skb, struct net_device *dev)
{
	struct demo_ring *ring = netdev_priv(dev);

	ring->skbs[ring->head++ & 63] = skb;
	if (demo_room(ring) < 2)
		netif_stop_queue(dev);
	return NETDEV_TX_OK;
}

static const struct net_device_ops demo_ring_ops = { .ndo_start_xmit = demo_xmit };

static void demo_setup(struct net_device *dev, struct demo_ring *ring)
{
	netif_napi_add(dev, &ring->napi, demo_poll);
}

static void demo_link_up(struct net_device *dev)
{
%s
}
"""

ROOM_WAKE = "\tif (demo_room(ring) > 8)\n\t\tnetif_wake_queue(ring->dev);"


def test_wake_made_conditional_on_room_is_a_decision():
    # the path with too little room passed the wake and its test decided: not a path left behind
    both = ROOM_WAKE + "\n\tnetif_wake_queue(ring->dev);"
    assert findings(RING % (both, ""), RING % (ROOM_WAKE, "")) == []


def test_parent_already_left_a_releasing_path_unwoken():
    # the parent woke only with room, so it already had a path releasing without a wake
    changed = ROOM_WAKE + "\n\tring->tail = ring->head;"
    assert findings(RING % (ROOM_WAKE, ""), RING % ("\tring->tail = ring->head;", "")) == []
    assert findings(RING % (ROOM_WAKE, ""), RING % (changed, "")) == []


def test_wake_turned_start():
    wake, start = "\tnetif_wake_queue(dev);", "\tnetif_start_queue(dev);"
    assert findings(RING % (ROOM_WAKE, wake), RING % (ROOM_WAKE, start)) == [("demo_link_up", "error")]
    # start back to wake, and the start linted: silent
    assert findings(RING % (ROOM_WAKE, start), RING % (ROOM_WAKE, wake)) == []
    assert findings(RING % (ROOM_WAKE, start), RING % (ROOM_WAKE, start), previous=False) == []


# a NAPI driver following the stop, full barrier, re-check pattern of netdev_queues.h
RECHECK = """
struct demo_ring { struct net_device *dev; struct napi_struct napi; spinlock_t lock; u16 index;
		   unsigned int head, tail; struct sk_buff *skbs[64]; };

static unsigned int demo_room(struct demo_ring *ring)
{
	return 64 - (READ_ONCE(ring->head) - READ_ONCE(ring->tail));
}

static int demo_poll(struct napi_struct *napi, int budget)
{
	struct demo_ring *ring = container_of(napi, struct demo_ring, napi);
	struct netdev_queue *txq = netdev_get_tx_queue(ring->dev, ring->index);

	%s
	while (ring->tail != ring->head)
		napi_consume_skb(ring->skbs[ring->tail++ & 63], budget);
	smp_mb();
	if (netif_tx_queue_stopped(txq) && demo_room(ring) > 8)
		netif_tx_wake_queue(txq);
	%s
	napi_complete(napi);
	return 0;
}

static netdev_tx_t demo_xmit(struct sk_buff *skb, struct net_device *dev)
{
	struct demo_ring *ring = netdev_priv(dev);
	struct netdev_queue *txq = netdev_get_tx_queue(dev, ring->index);

	%s
	ring->skbs[ring->head++ & 63] = skb;
%s
	%s
	return NETDEV_TX_OK;
}

static const struct net_device_ops demo_recheck_ops = { .ndo_start_xmit = demo_xmit };

static void demo_recheck_setup(struct net_device *dev, struct demo_ring *ring)
{
	netif_napi_add(dev, &ring->napi, demo_poll);
}
"""

STOP_BARRIER_RECHECK = """	if (demo_room(ring) < 2) {
		netif_tx_stop_queue(txq);
		smp_mb();
		if (demo_room(ring) >= 2)
			netif_tx_start_queue(txq);
	}"""
STOP_RECHECK = """	if (demo_room(ring) < 2) {
		netif_tx_stop_queue(txq);
		if (demo_room(ring) >= 2)
			netif_tx_start_queue(txq);
	}"""
STOP_ONLY = """	if (demo_room(ring) < 2)
		netif_tx_stop_queue(txq);"""
SELF_CHECKING = "\tnetif_txq_maybe_stop(txq, demo_room(ring), 2, 2);"


def guard(old: str, new: str, locked: bool = False):
    lock = ("spin_lock(&ring->lock);", "spin_unlock(&ring->lock);") if locked else ("", "")
    model = FileModel.build("drivers/net/ethernet/demo.c", (RECHECK % (*lock, *lock[:1], new, lock[1])).encode())
    model.previous = (RECHECK % (*lock, *lock[:1], old, lock[1])).encode()
    return [(f.function, f.severity) for f in checkfile.check_model(model, {STOP})
            if "as it was before this patch" in f.message]


def test_barrier_and_recheck_removed_after_stop():
    assert guard(STOP_BARRIER_RECHECK, STOP_ONLY) == [("demo_xmit", "warning")]
    assert guard(STOP_BARRIER_RECHECK, STOP_RECHECK) == [("demo_xmit", "warning")]
    assert guard(SELF_CHECKING, STOP_ONLY) == [("demo_xmit", "warning")]
    # the fixes, and a patch keeping the guard
    assert guard(STOP_ONLY, STOP_BARRIER_RECHECK) == [] and guard(STOP_ONLY, SELF_CHECKING) == []
    assert guard(STOP_BARRIER_RECHECK, SELF_CHECKING) == []


def test_guard_removed_under_the_completions_lock_is_safe():
    # the completion wakes under the lock the stop is made under: the two cannot interleave
    assert guard(STOP_BARRIER_RECHECK, STOP_ONLY, locked=True) == []


def test_wake_turned_start_in_open_strands_nothing():
    # open runs before the stack activates the qdisc: a start there is the idiom
    opened = RING.replace("static const struct net_device_ops demo_ring_ops = { .ndo_start_xmit = demo_xmit };",
                          "static const struct net_device_ops demo_ring_ops = { .ndo_start_xmit = demo_xmit, "
                          ".ndo_open = demo_open };")
    opened = opened.replace("static void demo_link_up(struct net_device *dev)", "static int demo_open(struct net_device *dev)")
    wake, start = "\tnetif_wake_queue(dev);\n\treturn 0;", "\tnetif_start_queue(dev);\n\treturn 0;"
    assert findings(opened % (ROOM_WAKE, wake), opened % (ROOM_WAKE, start)) == []


# a helper the transmit path and a NAPI poll (XDP_TX) share: stop, full barrier, re-check
SHARED_STOP = """
struct demo_ring { struct net_device *dev; struct napi_struct napi; u16 index;
		   unsigned int head, tail; struct sk_buff *skbs[64]; };

static unsigned int demo_room(struct demo_ring *ring)
{
	return 64 - (READ_ONCE(ring->head) - READ_ONCE(ring->tail));
}

static void demo_stop_if_full(struct demo_ring *ring, struct netdev_queue *txq)
{
	if (demo_room(ring) < 2) {
		netif_tx_stop_queue(txq);
		smp_mb();
		if (demo_room(ring) >= 2)
			%s(txq);
	}
}

static int demo_poll(struct napi_struct *napi, int budget)
{
	struct demo_ring *ring = container_of(napi, struct demo_ring, napi);
	struct netdev_queue *txq = netdev_get_tx_queue(ring->dev, ring->index);

	while (ring->tail != ring->head)
		napi_consume_skb(ring->skbs[ring->tail++ & 63], budget);
	smp_mb();
	if (netif_tx_queue_stopped(txq) && demo_room(ring) > 8)
		netif_tx_wake_queue(txq);
	demo_stop_if_full(ring, txq);
	napi_complete(napi);
	return 0;
}

static netdev_tx_t demo_xmit(struct sk_buff *skb, struct net_device *dev)
{
	struct demo_ring *ring = netdev_priv(dev);
	struct netdev_queue *txq = netdev_get_tx_queue(dev, ring->index);

	ring->skbs[ring->head++ & 63] = skb;
	demo_stop_if_full(ring, txq);
	return NETDEV_TX_OK;
}

static const struct net_device_ops demo_shared_ops = { .ndo_start_xmit = demo_xmit };

static void demo_shared_setup(struct net_device *dev, struct demo_ring *ring)
{
	netif_napi_add(dev, &ring->napi, demo_poll);
}
"""


def test_start_in_the_stopping_paths_own_recheck():
    # the kernel's netif_txq_try_stop() starts there too: the stopping path, not a stalled queue
    model = FileModel.build("drivers/net/ethernet/demo.c", (SHARED_STOP % "netif_tx_start_queue").encode())
    model.previous = (SHARED_STOP % "netif_tx_wake_queue").encode()
    assert [f.function for f in checkfile.check_model(model, {STOP}) if "replaces the" in f.message] == []


def test_start_after_a_wake_that_stays():
    # resume: netif_device_attach() wakes every queue and reschedules the qdisc; a start after it adds nothing
    attached = "\tnetif_device_attach(dev);\n"
    wake, start = attached + "\tnetif_wake_queue(dev);", attached + "\tnetif_start_queue(dev);"
    assert findings(RING % (ROOM_WAKE, wake), RING % (ROOM_WAKE, start)) == []
