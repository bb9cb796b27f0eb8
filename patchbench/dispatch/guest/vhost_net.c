/* Guest exercise for a series touching vhost-net (or the tap/tun ring it consumes): be the virtio
 * driver of a vhost-net device whose backend is a tap device, with our own memory as "guest memory".
 *
 * Usage: vhost_net NAME
 * TX: frames put on the transmit virtqueue must all come back used (vhost sent them into the tap).
 * RX: a child writes UDP broadcasts into tap device NAME (10.21.0.1/24); vhost moves them from the
 * tap's ring into our receive buffers, which we hand back slowly at first, so the tap's ring fills
 * and a driver that stops its queue on a full ring must wake it. Prints one status line:
 *   vhost_net: NAME: sent N, received M ...                      (packets kept flowing)
 *   PATCHBENCH-STALL: vhost-net NAME rx queue|tx queue: ...      (they stopped)
 */
#include <fcntl.h>
#include <linux/if_tun.h>
#include <linux/vhost.h>
#include <linux/virtio_net.h>
#include <linux/virtio_ring.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>

#include "guest_net.h"

#define QSIZE		256
#define BUF_SIZE	2048
#define TX_FRAMES	64
#define FILL_MS		1000	/* receive buffers are not handed back for this long */
#define SLOW_REFILLS	200	/* then this many, one at a time with a pause */
#define SLOW_US		2000
#define RUN_MS		4000
#define MEMORY		(4 << 20)

struct queue {
	struct vring ring;
	int kick, call;
	uint16_t avail_idx, used_idx;
	char *buffers;
};

static char *memory;

static void fail(const char *what)
{
	perror(what);
	exit(1);
}

static void add_buffer(struct queue *q, uint16_t id, uint32_t len, int device_writes)
{
	q->ring.desc[id].addr = (uintptr_t)(q->buffers + (size_t)id * BUF_SIZE);
	q->ring.desc[id].len = len;
	q->ring.desc[id].flags = device_writes ? VRING_DESC_F_WRITE : 0;
	q->ring.avail->ring[q->avail_idx % QSIZE] = id;
	__sync_synchronize();	/* the descriptor before the index that publishes it */
	q->ring.avail->idx = ++q->avail_idx;
}

static void kick(struct queue *q)
{
	uint64_t one = 1;

	__sync_synchronize();
	if (write(q->kick, &one, sizeof(one)) != sizeof(one))
		fail("vhost_net: kick");
}

/* The next used descriptor id, or -1 when the device has returned nothing new. */
static int next_used(struct queue *q)
{
	int id;

	if (q->used_idx == *(volatile uint16_t *)&q->ring.used->idx)
		return -1;
	__sync_synchronize();
	id = q->ring.used->ring[q->used_idx % QSIZE].id;
	q->used_idx++;
	return id;
}

static void set_up_queue(int vhost, int index, struct queue *q, char **cursor, int tap)
{
	struct vhost_vring_state num = { .index = index, .num = QSIZE }, base = { .index = index, .num = 0 };
	struct vhost_vring_file kick = { .index = index }, call = { .index = index }, backend = { .index = index };
	struct vhost_vring_addr addr = { .index = index };

	vring_init(&q->ring, QSIZE, *cursor, 4096);
	*cursor += (vring_size(QSIZE, 4096) + 4095) & ~4095UL;
	q->buffers = *cursor;
	*cursor += QSIZE * BUF_SIZE;
	q->kick = kick.fd = eventfd(0, 0);
	q->call = call.fd = eventfd(0, EFD_NONBLOCK);
	addr.desc_user_addr = (uintptr_t)q->ring.desc;
	addr.avail_user_addr = (uintptr_t)q->ring.avail;
	addr.used_user_addr = (uintptr_t)q->ring.used;
	backend.fd = tap;
	if (ioctl(vhost, VHOST_SET_VRING_NUM, &num) < 0 || ioctl(vhost, VHOST_SET_VRING_BASE, &base) < 0 ||
	    ioctl(vhost, VHOST_SET_VRING_ADDR, &addr) < 0 || ioctl(vhost, VHOST_SET_VRING_KICK, &kick) < 0 ||
	    ioctl(vhost, VHOST_SET_VRING_CALL, &call) < 0 || ioctl(vhost, VHOST_NET_SET_BACKEND, &backend) < 0)
		fail("vhost_net: set up virtqueue");
}

static int open_vhost(int tap, struct queue *rx, struct queue *tx)
{
	struct { struct vhost_memory head; struct vhost_memory_region region; } table = {
		.head = { .nregions = 1 },
		.region = { .guest_phys_addr = (uintptr_t)memory, .memory_size = MEMORY,
			    .userspace_addr = (uintptr_t)memory },
	};
	uint64_t features = 0;	/* legacy virtio-net header of 10 bytes, carried by the tap (IFF_VNET_HDR) */
	int vhost = open("/dev/vhost-net", O_RDWR);
	char *cursor = memory;

	if (vhost < 0 || ioctl(vhost, VHOST_SET_OWNER) < 0 || ioctl(vhost, VHOST_SET_FEATURES, &features) < 0 ||
	    ioctl(vhost, VHOST_SET_MEM_TABLE, &table) < 0)
		fail("vhost_net: set up /dev/vhost-net");
	set_up_queue(vhost, 0, rx, &cursor, tap);
	set_up_queue(vhost, 1, tx, &cursor, tap);
	return vhost;
}

/* TX: broadcast frames of an unused ethertype, each after a zero virtio-net header. */
static int transmit(struct queue *tx)
{
	static const unsigned char frame[60] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
						 0x02, 0, 0, 0, 0, 0x01, 0x88, 0xb5 };
	double start;
	int id, used = 0;

	for (id = 0; id < TX_FRAMES; id++) {
		memset(tx->buffers + (size_t)id * BUF_SIZE, 0, sizeof(struct virtio_net_hdr));
		memcpy(tx->buffers + (size_t)id * BUF_SIZE + sizeof(struct virtio_net_hdr), frame, sizeof(frame));
		add_buffer(tx, id, sizeof(struct virtio_net_hdr) + sizeof(frame), 0);
	}
	kick(tx);
	for (start = now_ms(); used < TX_FRAMES && now_ms() - start < STALL_MS; usleep(1000))
		while (next_used(tx) >= 0)
			used++;
	return used;
}

int main(int argc, char **argv)
{
	struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR };
	struct queue rx = { 0 }, tx = { 0 };
	struct flow flow = { 0 };
	long refilled = 0;
	double start;
	int tap, sent, id, stall = 0;

	if (argc != 2)
		return 2;
	memory = mmap(NULL, MEMORY, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	tap = open("/dev/net/tun", O_RDWR);
	strncpy(ifr.ifr_name, argv[1], IFNAMSIZ - 1);
	if (memory == MAP_FAILED || tap < 0 || ioctl(tap, TUNSETIFF, &ifr) < 0 || bring_up(argv[1], "10.21.0.1") < 0)
		fail("vhost_net: set up the tap");
	open_vhost(tap, &rx, &tx);
	sent = transmit(&tx);
	if (sent < TX_FRAMES) {
		printf("PATCHBENCH-STALL: vhost-net %s tx queue: %d of %d frames came back used within %d s\n",
		       argv[1], sent, TX_FRAMES, STALL_MS / 1000);
		return 1;
	}
	for (id = 0; id < QSIZE; id++)
		add_buffer(&rx, id, BUF_SIZE, 1);
	kick(&rx);
	if (start_flow(&flow, "10.21.0.255") < 0)
		fail("vhost_net: writer");
	usleep(FILL_MS * 1000);
	flow.last = start = now_ms();
	while (now_ms() - start < RUN_MS + SLOW_REFILLS * SLOW_US / 1000 && !(stall = stalled(&flow))) {
		struct pollfd pfd = { .fd = rx.call, .events = POLLIN };
		uint64_t events;

		if (poll(&pfd, 1, 100) > 0 && read(rx.call, &events, sizeof(events)) < 0)
			fail("vhost_net: call eventfd");
		while ((id = next_used(&rx)) >= 0) {
			packet_arrived(&flow);
			add_buffer(&rx, id, BUF_SIZE, 1);	/* hand it back: slowly at first */
			kick(&rx);
			if (refilled++ < SLOW_REFILLS)
				usleep(SLOW_US);
		}
	}
	stop_flow(&flow);
	if (stall) {
		printf("PATCHBENCH-STALL: vhost-net %s rx queue: no packet for %d s while the writer sent %ld more "
		       "(%ld received before)\n", argv[1], STALL_MS / 1000, *flow.sent - flow.sent_at_last, flow.got);
		return 1;
	}
	printf("vhost_net: %s: sent %d frames, received %ld packets\n", argv[1], sent, flow.got);
	return 0;
}
