/* Guest exercise for a series touching tun: fill the tx ring of a tun device and drain it slowly, so
 * that a driver which stops its queue on a full ring must wake it again; report a stall when packets
 * stop flowing while the writer keeps sending.
 *
 * Usage: tun_ring NAME
 * A child writes UDP datagrams routed into tun device NAME (10.20.0.1/24 -> 10.20.0.2), first a burst
 * larger than the ring while nobody reads, then at a steady pace. The parent reads from the tun fd:
 * after a pause (the ring fills), slowly, then at full speed. Prints one status line:
 *   tun_ring: NAME: read N packets ...                         (packets kept flowing)
 *   PATCHBENCH-STALL: tun NAME tx queue: no packet for S s ... (they stopped: the queue never woke)
 */
#include <fcntl.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include "guest_net.h"

#define FILL_MS		1000	/* nobody reads for this long: the ring fills */
#define SLOW_READS	200	/* then this many reads, each followed by a pause */
#define SLOW_US		2000
#define RUN_MS		4000	/* reading goes on this long after the slow part */

int main(int argc, char **argv)
{
	struct ifreq ifr = { .ifr_flags = IFF_TUN | IFF_NO_PI };
	struct flow flow = { 0 };
	unsigned char pkt[2048];
	long slow = 0;
	double start;
	int fd, stall = 0;

	if (argc != 2)
		return 2;
	fd = open("/dev/net/tun", O_RDWR);
	strncpy(ifr.ifr_name, argv[1], IFNAMSIZ - 1);
	if (fd < 0 || ioctl(fd, TUNSETIFF, &ifr) < 0 || bring_up(argv[1], "10.20.0.1") < 0 ||
	    start_flow(&flow, "10.20.0.2") < 0) {
		perror("tun_ring: set up");
		return 1;
	}
	usleep(FILL_MS * 1000);
	flow.last = start = now_ms();
	while (now_ms() - start < RUN_MS + SLOW_READS * SLOW_US / 1000 && !(stall = stalled(&flow))) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };

		if (poll(&pfd, 1, 100) <= 0 || read(fd, pkt, sizeof(pkt)) <= 0)
			continue;
		packet_arrived(&flow);
		if (slow < SLOW_READS) {
			slow++;
			usleep(SLOW_US);
		}
	}
	stop_flow(&flow);
	if (stall) {
		printf("PATCHBENCH-STALL: tun %s tx queue: no packet for %d s while the writer sent %ld more "
		       "(%ld read before)\n", argv[1], STALL_MS / 1000, *flow.sent - flow.sent_at_last, flow.got);
		return 1;
	}
	printf("tun_ring: %s: read %ld packets, longest wait %.0f ms\n", argv[1], flow.got, flow.longest);
	return 0;
}
