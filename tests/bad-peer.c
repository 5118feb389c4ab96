/*
 * bad-peer [-i IMM] [-p PORT] [-s SEED] CASE HOST [HUBPORT]
 *
 * Plays a misbehaving peer hub: connects to the hub peer port (default
 * 18515) of HOST, sends the bytes of CASE, then reads until the hub closes
 * the connection.  Every case but early and good is something a hub must
 * refuse by dropping the link (rshare-protocol(7)):
 *
 *   magic     HELLO with a wrong magic
 *   version   HELLO with the protocol version after the hub's
 *   nothello  a well formed CONTROL (SEND) frame as the first frame
 *   type      HELLO, then a frame of unknown type 9
 *   op        HELLO, then a control message with unknown op 77
 *   ctllen    HELLO, then a control frame of 32 bytes instead of 64
 *   wlen      HELLO, then a write frame longer than the largest write
 *   foreign   HELLO, then a write with immediate IMM (-i): a socket of the
 *             hub that lives on another link
 *   window    HELLO, CONNECT to PORT (-p) on HOST, wait for the ACCEPT,
 *             then a write to the accepted socket at a ring position
 *             outside its window
 *   garbage   4 KiB of pseudo-random bytes (seed -s)
 *   hgarbage  HELLO, then 4 KiB of pseudo-random bytes
 *   good      HELLO only; holds the link open 1 s, then closes it itself
 *   early     HELLO, then 200 CONNECTs to PORT (-p) marked CONNECT_EARLY
 *             with a write of 100 bytes behind each that names its
 *             writer, and one naming a socket it never connected: counts
 *             the ACCEPTs and REFUSEs (a listener that does not accept
 *             queues such connects up to twice its backlog and 64 more),
 *             then holds the link 1 s
 *
 * Prints "sent CASE", then "closed eof" or "closed reset" when the hub
 * closed the link.  Exit 0 when the hub closed it within 10 s, 1 when not
 * (or on any local error), 2 on usage.  For "good": "held" and exit 0 when
 * the hub kept the link for the second.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>

#include "frame.h"

#define BAD_NODE 0x0bad0bad0bad0badull

static int fd = -1;
static uint8_t in[1 << 20];
static size_t ilen;

static void put(const void *b, size_t n)
{
	if (t_write_full(fd, b, n) < 0)
		t_die("bad-peer: write: %s", strerror(errno));
}

static void frame(uint8_t type, uint32_t len, uint32_t imm, uint64_t raddr, const void *pay,
		  size_t paylen)
{
	struct wire_frame f = {.type = type, .len = len, .imm = imm, .raddr = raddr};
	uint8_t h[WIRE_FRAME_LEN];
	wire_frame_encode(&f, h);
	put(h, sizeof(h));
	if (paylen)
		put(pay, paylen);
}

static void hello(uint32_t magic, uint16_t version)
{
	struct wire_hello hh = {.magic = magic, .version = version, .node_id = BAD_NODE,
				.max_write = WIRE_MAX_WRITE};
	uint8_t b[WIRE_HELLO_LEN];
	wire_hello_encode(&hh, b);
	frame(FR_HELLO, sizeof(b), 0, 0, b, sizeof(b));
}

static void ctl(const struct wire_ctl *c)
{
	uint8_t b[WIRE_CTL_LEN];
	wire_ctl_encode(c, b);
	frame(FR_SEND, sizeof(b), 0, 0, b, sizeof(b));
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Read what the hub sends for up to secs: 0 at EOF, 1 at reset, -1 when
 * the link is still open after secs. */
static int read_until_closed(double secs)
{
	double end = now() + secs;
	for (;;) {
		double left = end - now();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (left <= 0)
			return -1;
		int r = poll(&p, 1, (int)(left * 1000) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			continue;
		if (ilen == sizeof(in))
			ilen = 0; /* keep reading; only the first frames matter */
		ssize_t n = recv(fd, in + ilen, sizeof(in) - ilen, 0);
		if (n == 0)
			return 0;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			if (errno == ECONNRESET || errno == EPIPE)
				return 1;
			t_die("bad-peer: recv: %s", strerror(errno));
		}
		ilen += (size_t)n;
	}
}

/* Wait for an ACCEPT control message naming our socket src; its src. */
static uint32_t wait_accept(uint32_t mysrc, double secs)
{
	double end = now() + secs;
	size_t off = 0;
	for (;;) {
		while (ilen - off >= WIRE_FRAME_LEN) {
			struct wire_frame f;
			const char *why;
			if (wire_frame_decode(in + off, &f, &why) < 0)
				t_die("bad-peer: hub sent a bad frame: %s", why);
			if (ilen - off < WIRE_FRAME_LEN + f.len)
				break;
			if (f.type == FR_SEND) {
				struct wire_ctl c;
				if (wire_ctl_decode(in + off + WIRE_FRAME_LEN, f.len, &c, &why) < 0)
					t_die("bad-peer: hub sent a bad control message: %s", why);
				if (c.op == CTL_ACCEPT && c.dst == mysrc)
					return c.src;
				if (c.op == CTL_REFUSE && c.dst == mysrc)
					t_die("bad-peer: CONNECT refused (reason %u)", c.reason);
			}
			off += WIRE_FRAME_LEN + f.len;
		}
		double left = end - now();
		if (left <= 0)
			t_die("bad-peer: no ACCEPT within %.0f s", secs);
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
			continue;
		if (ilen == sizeof(in))
			t_die("bad-peer: too much before the ACCEPT");
		ssize_t n = recv(fd, in + ilen, sizeof(in) - ilen, 0);
		if (n <= 0)
			t_die("bad-peer: link closed before the ACCEPT: %s", n ? strerror(errno) : "EOF");
		ilen += (size_t)n;
	}
}

/* the link to the hub at HOST:HUBPORT, into fd; *a: the hub's address */
static void dial_hub(struct sockaddr_in *a, const char *host, int hubport)
{
	*a = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)hubport)};
	if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
		t_die("bad-peer: %s: not an IPv4 address", host);

	signal(SIGPIPE, SIG_IGN);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)a, sizeof(*a)) < 0)
		t_die("bad-peer: connect %s:%d: %s", host, hubport, strerror(errno));
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* "window": CONNECT to PORT, wait for the ACCEPT, write outside the window */
static void send_window(const struct sockaddr_in *a, int port)
{
	struct wire_ctl c = {.op = CTL_CONNECT, .port = (uint16_t)port, .src = 7 << 12 | 1,
			     .ring = 65536, .src_port = 40000};
	struct sockaddr_in me;
	socklen_t ml = sizeof(me);
	uint8_t pay[100];
	if (!port)
		t_die("bad-peer: window needs -p PORT");
	getsockname(fd, (struct sockaddr *)&me, &ml);
	c.family = AF_INET;
	memcpy(c.addr_a, &a->sin_addr, 4);
	memcpy(c.addr_b, &me.sin_addr, 4);
	hello(WIRE_MAGIC, WIRE_VERSION);
	ctl(&c);
	uint32_t peer = wait_accept(c.src, 10);
	printf("accepted by socket imm 0x%x\n", peer);
	memset(pay, 0xee, sizeof(pay));
	/* far beyond any credit the hub gave */
	frame(FR_WRITE_IMM, sizeof(pay), peer, 1ull << 40, pay, sizeof(pay));
}

/* "early": 200 connects answered early, each with a write behind it
 * (WIRE_BY_SRC), and a write naming a socket never connected; prints
 * how many were accepted and refused, and whether the link stayed */
static int send_early(const struct sockaddr_in *a, int port)
{
	struct wire_ctl c = {.op = CTL_CONNECT, .family = AF_INET, .port = (uint16_t)port, .ring = 65536,
			     .reason = CONNECT_EARLY};
	struct sockaddr_in me;
	socklen_t ml = sizeof(me);
	uint8_t pay[100];
	unsigned acc = 0, ref = 0, n = 200;
	size_t off = 0;
	double end = now() + 10;
	if (!port)
		t_die("bad-peer: early needs -p PORT");
	getsockname(fd, (struct sockaddr *)&me, &ml);
	memcpy(c.addr_a, &a->sin_addr, 4);
	memcpy(c.addr_b, &me.sin_addr, 4);
	memset(pay, 0xee, sizeof(pay));
	hello(WIRE_MAGIC, WIRE_VERSION);
	for (unsigned i = 0; i < n; i++) {
		c.src = (i + 1) << 12 | 1;
		c.src_port = (uint16_t)(40000 + i);
		ctl(&c);
		frame(FR_WRITE_IMM, sizeof(pay), c.src, WIRE_BY_SRC, pay, sizeof(pay));
	}
	frame(FR_WRITE_IMM, sizeof(pay), 4000u << 12 | 1, WIRE_BY_SRC, pay, sizeof(pay));
	while (acc + ref < n && now() < end) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t r;
		if (poll(&p, 1, 100) <= 0)
			continue;
		if (ilen == sizeof(in) || (r = recv(fd, in + ilen, sizeof(in) - ilen, 0)) <= 0)
			break;
		ilen += (size_t)r;
		while (ilen - off >= WIRE_FRAME_LEN) {
			struct wire_frame f;
			struct wire_ctl rc;
			const char *why;
			if (wire_frame_decode(in + off, &f, &why) < 0)
				t_die("bad-peer: hub sent a bad frame: %s", why);
			if (ilen - off < WIRE_FRAME_LEN + f.len)
				break;
			if (f.type == FR_SEND && wire_ctl_decode(in + off + WIRE_FRAME_LEN, f.len, &rc, &why) == 0) {
				acc += rc.op == CTL_ACCEPT;
				ref += rc.op == CTL_REFUSE && rc.reason == REFUSE_NO_SPACE;
			}
			off += WIRE_FRAME_LEN + f.len;
		}
	}
	printf("early: %u accepted, %u refused for want of room\n", acc, ref);
	if (read_until_closed(1.0) >= 0) {
		printf("link closed\n");
		return 1;
	}
	printf("link kept\n");
	return 0;
}

/* "garbage" and (with_hello) "hgarbage": 4 KiB of the stream of SEED */
static void send_garbage(int with_hello, uint64_t seed)
{
	uint8_t g[4096];
	uint64_t s = seed;
	for (size_t i = 0; i < sizeof(g); i += 8) {
		uint64_t v = t_splitmix(&s);
		memcpy(g + i, &v, 8);
	}
	if (with_hello)
		hello(WIRE_MAGIC, WIRE_VERSION);
	put(g, sizeof(g));
}

/* after "sent CASE": how the hub ended the link, as main's exit status */
static int await_close(const char *cs)
{
	switch (read_until_closed(10)) {
	case 0:
		printf("closed eof\n");
		return 0;
	case 1:
		printf("closed reset\n");
		return 0;
	}
	fprintf(stderr, "bad-peer: %s: the hub kept the link open for 10 s\n", cs);
	return 1;
}

int main(int argc, char **argv)
{
	uint32_t imm = 0;
	int port = 0, opt;
	uint64_t seed = 1;
	while ((opt = getopt(argc, argv, "i:p:s:")) != -1) {
		switch (opt) {
		case 'i': imm = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'p': port = atoi(optarg); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		default: goto usage;
		}
	}
	if (argc - optind < 2 || argc - optind > 3)
		goto usage;
	const char *cs = argv[optind], *host = argv[optind + 1];
	int hubport = argc - optind == 3 ? atoi(argv[optind + 2]) : 18515;
	struct sockaddr_in a;
	dial_hub(&a, host, hubport);

	if (!strcmp(cs, "magic")) {
		hello(0xdeadbeef, WIRE_VERSION);
	} else if (!strcmp(cs, "version")) {
		hello(WIRE_MAGIC, WIRE_VERSION + 1);
	} else if (!strcmp(cs, "nothello")) {
		struct wire_ctl c = {.op = CTL_FIN, .dst = 1 << 12 | 1, .src = 2 << 12 | 1};
		ctl(&c);
	} else if (!strcmp(cs, "type")) {
		uint8_t pay[16] = {0};
		hello(WIRE_MAGIC, WIRE_VERSION);
		frame(9, sizeof(pay), 0, 0, pay, sizeof(pay));
	} else if (!strcmp(cs, "op")) {
		uint8_t b[WIRE_CTL_LEN] = {0};
		hello(WIRE_MAGIC, WIRE_VERSION);
		b[0] = 77;        /* op */
		b[7] = 1;         /* dst 1: not 0, so only the op is wrong */
		frame(FR_SEND, sizeof(b), 0, 0, b, sizeof(b));
	} else if (!strcmp(cs, "ctllen")) {
		uint8_t b[32] = {CTL_FIN};
		hello(WIRE_MAGIC, WIRE_VERSION);
		frame(FR_SEND, sizeof(b), 0, 0, b, sizeof(b));
	} else if (!strcmp(cs, "wlen")) {
		hello(WIRE_MAGIC, WIRE_VERSION);
		frame(FR_WRITE_IMM, WIRE_MAX_WRITE + 1, 1 << 12 | 1, 0, NULL, 0);
	} else if (!strcmp(cs, "foreign")) {
		uint8_t pay[100];
		if (!imm)
			t_die("bad-peer: foreign needs -i IMM");
		memset(pay, 0xee, sizeof(pay));
		hello(WIRE_MAGIC, WIRE_VERSION);
		/* ring position 0: the socket's link is what is wrong */
		frame(FR_WRITE_IMM, sizeof(pay), imm, 0, pay, sizeof(pay));
	} else if (!strcmp(cs, "window")) {
		send_window(&a, port);
	} else if (!strcmp(cs, "garbage") || !strcmp(cs, "hgarbage")) {
		send_garbage(cs[0] == 'h', seed);
	} else if (!strcmp(cs, "early")) {
		return send_early(&a, port);
	} else if (!strcmp(cs, "good")) {
		hello(WIRE_MAGIC, WIRE_VERSION);
		printf("sent %s\n", cs);
		fflush(stdout);
		if (read_until_closed(1.0) >= 0)
			t_die("bad-peer: the hub closed a well formed link");
		printf("held\n");
		return 0;
	} else {
		goto usage;
	}
	printf("sent %s\n", cs);
	fflush(stdout);
	return await_close(cs);
usage:
	fprintf(stderr, "usage: bad-peer [-i IMM] [-p PORT] [-s SEED] CASE HOST [HUBPORT]\n");
	return 2;
}
