/* Shared by the guest exercise programs: a clock, bringing a device up with an IPv4 address, and a
 * UDP writer that bursts past a queue's size and then keeps a steady pace. */
#include <arpa/inet.h>
#include <linux/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BURST		2000	/* more than a tx ring (tx_queue_len 500) and the qdisc hold */
#define PACE_US		1000	/* then one datagram a millisecond */

/* A stall: no packet for STALL_MS while the writer sent STALL_PACKETS more. Both, so that a guest the
 * host starves of CPU (every clock jumps, nobody runs) is not taken for a stalled queue. */
#define STALL_MS	2000
#define STALL_PACKETS	300

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int set_addr(int sock, const char *name, unsigned long request, const char *addr)
{
	struct ifreq ifr = { 0 };
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;

	strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
	sin->sin_family = AF_INET;
	inet_pton(AF_INET, addr, &sin->sin_addr);
	return ioctl(sock, request, &ifr);
}

/* NAME up with ADDR/24. */
static int bring_up(const char *name, const char *addr)
{
	struct ifreq ifr = { 0 };
	int sock = socket(AF_INET, SOCK_DGRAM, 0);

	strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
	if (sock < 0 || set_addr(sock, name, SIOCSIFADDR, addr) < 0 ||
	    set_addr(sock, name, SIOCSIFNETMASK, "255.255.255.0") < 0 ||
	    ioctl(sock, SIOCGIFFLAGS, &ifr) < 0)
		return -1;
	ifr.ifr_flags |= IFF_UP;
	return ioctl(sock, SIOCSIFFLAGS, &ifr);
}

/* Send UDP datagrams to DEST:9 forever (the caller kills it), counting them in *SENT; errors such
 * as ENOBUFS on a full queue are expected: keep sending. */
static void writer(const char *dest, volatile long *sent)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(9) };
	char payload[64] = "patchbench exercise";
	int sock = socket(AF_INET, SOCK_DGRAM, 0), on = 1;
	long i;

	setsockopt(sock, SOL_SOCKET, SO_BROADCAST, &on, sizeof(on));
	inet_pton(AF_INET, dest, &to.sin_addr);
	for (i = 0;; i++) {
		sendto(sock, payload, sizeof(payload), MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to));
		*sent = i + 1;
		if (i >= BURST)
			usleep(PACE_US);
	}
}

/* Packets flowing from the writer child to the parent, who says when one arrived. */
struct flow {
	pid_t writer;
	volatile long *sent;		/* shared with the writer */
	double last;			/* when the last packet arrived */
	long sent_at_last;
	double longest;			/* the longest wait for a packet */
	long got;
};

static int start_flow(struct flow *f, const char *dest)
{
	void *shared = mmap(NULL, sizeof(long), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (shared == MAP_FAILED)
		return -1;
	f->sent = shared;
	f->writer = fork();
	if (f->writer == 0) {
		writer(dest, f->sent);
		_exit(0);
	}
	f->last = now_ms();
	return f->writer < 0 ? -1 : 0;
}

static void packet_arrived(struct flow *f)
{
	double t = now_ms();

	if (t - f->last > f->longest)
		f->longest = t - f->last;
	f->last = t;
	f->sent_at_last = *f->sent;
	f->got++;
}

static int stalled(const struct flow *f)
{
	return now_ms() - f->last >= STALL_MS && *f->sent - f->sent_at_last >= STALL_PACKETS;
}

static void stop_flow(struct flow *f)
{
	int status;

	kill(f->writer, SIGKILL);
	waitpid(f->writer, &status, 0);
}
