/* Guest helper for the boot smoke test: open tun device NAME and answer every ICMP echo request the
 * kernel sends into it, so that `ping` through the tun device exercises both its read and write paths.
 * Usage: tun_echo NAME COUNT  (exits after answering COUNT requests). */
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct ifreq ifr = { .ifr_flags = IFF_TUN | IFF_NO_PI };
	unsigned char pkt[2048];
	int fd, answered = 0, want;

	if (argc != 3)
		return 2;
	want = atoi(argv[2]);
	fd = open("/dev/net/tun", O_RDWR);
	if (fd < 0 || (strncpy(ifr.ifr_name, argv[1], IFNAMSIZ - 1), ioctl(fd, TUNSETIFF, &ifr)) < 0) {
		perror("tun_echo: TUNSETIFF");
		return 1;
	}
	printf("tun_echo: %s ready\n", ifr.ifr_name);
	fflush(stdout);
	while (answered < want) {
		ssize_t n = read(fd, pkt, sizeof(pkt));
		unsigned int ihl, sum;
		unsigned char addr[4];

		if (n < 0) {
			perror("tun_echo: read");
			return 1;
		}
		ihl = (pkt[0] & 0x0f) * 4;
		if (n < ihl + 8 || (pkt[0] >> 4) != 4 || pkt[9] != 1 || pkt[ihl] != 8)
			continue;	/* not an IPv4 ICMP echo request */
		memcpy(addr, pkt + 12, 4);	/* swap source and destination: the IP checksum is unchanged */
		memcpy(pkt + 12, pkt + 16, 4);
		memcpy(pkt + 16, addr, 4);
		pkt[ihl] = 0;			/* echo reply: adjust the ICMP checksum for type 8 -> 0 */
		sum = ((pkt[ihl + 2] << 8) | pkt[ihl + 3]) + 0x0800;
		sum = (sum & 0xffff) + (sum >> 16);
		pkt[ihl + 2] = sum >> 8;
		pkt[ihl + 3] = sum & 0xff;
		if (write(fd, pkt, n) != n) {
			perror("tun_echo: write");
			return 1;
		}
		answered++;
	}
	return 0;
}
