/*
 * polled-connections: what polled connections cost a program in
 * descriptors, and the socket options and flags it reads back from them,
 * as on kernel TCP.
 *
 *   polled-connections server PORT
 *       One process: a nonblocking listener and one epoll set; accepts
 *       every connection, registers it and echoes.  Prints "ready", then
 *       "held=H last100=D" each time it holds a multiple of 100 connections
 *       (from 200 on), D being the descriptors the last hundred cost it.
 *   polled-connections client [-n N] [-o] HOST PORT
 *       Opens N (200) connections nonblocking, each registered in one epoll
 *       set, waits for each to connect, then echoes 16 bytes on each
 *       through the set; prints "per_conn_x100=X library=L" (the
 *       descriptors the second half of the connections cost, per
 *       connection, times 100; L "few" when the process holds at most 8
 *       descriptors beyond its connections, else their count), then with
 *       -o the socket options, flags and errors it reads back from two of
 *       them (one set before connect, one set after it was polled).
 *   polled-connections limit HOST PORT
 *       Opens connections (blocking connect, then registered in an epoll
 *       set) until one fails; prints "opened=K first=ERRNO".
 *
 * Plain BSD sockets: knows nothing of rshare.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>

static int nfds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;
	if (!d)
		t_die("opendir: %s", strerror(errno));
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own */
}

static int server(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1, ep, held = 0, base;
	struct epoll_event ev[64], e = {.events = EPOLLIN, .data.fd = -1};
	char buf[4096];
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1024) < 0)
		t_die("listen: %s", strerror(errno));
	if ((ep = epoll_create1(0)) < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, l, &e) < 0)
		t_die("epoll: %s", strerror(errno));
	base = -1;
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int n = epoll_wait(ep, ev, 64, -1);
		for (int i = 0; i < n; i++) {
			int fd = ev[i].data.fd;
			ssize_t r;
			if (fd < 0) {
				int c;
				while ((c = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
					struct epoll_event ce = {.events = EPOLLIN, .data.fd = c};
					if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce) < 0)
						t_die("epoll_ctl: %s", strerror(errno));
					/* from the second hundred on: what the library
					 * made once (its hub connection...) is not counted */
					if (++held % 100 == 0) {
						int now = nfds();
						if (base >= 0) {
							printf("held=%d last100=%d\n", held, now - base);
							fflush(stdout);
						}
						base = now;
					}
				}
				continue;
			}
			r = read(fd, buf, sizeof(buf));
			if (r > 0 && write(fd, buf, (size_t)r) == r)
				continue;
			if (r < 0 && errno == EAGAIN)
				continue;
			close(fd);
			held--;
		}
	}
}

static int connect_to(const char *host, int port, int flags)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | flags, 0);
	inet_pton(AF_INET, host, &a.sin_addr);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* the connections lo..hi-1 of fds[], registered in ep with their index
 * for EPOLLOUT: each connected (then waiting for nothing), then each
 * written and echoed */
static void connect_and_echo(int ep, const int *fds, int lo, int hi)
{
	struct epoll_event ev[64];
	int left = hi - lo, echoed = 0;
	char *done = calloc((size_t)hi, 1), buf[64];
	if (!done)
		t_die("calloc");
	while (left) {
		int k = epoll_wait(ep, ev, 64, 10000), err;
		socklen_t el = sizeof(err);
		if (k <= 0)
			t_die("connects: %d of %d left", left, hi - lo);
		for (int i = 0; i < k; i++) {
			uint32_t c = ev[i].data.u32;
			struct epoll_event none = {.events = 0, .data.u32 = c};
			if (done[c])
				t_die("connection %u: an event it did not ask for (%#x)", c, ev[i].events);
			if (getsockopt(fds[c], SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err)
				t_die("connect: %s", strerror(err));
			if (epoll_ctl(ep, EPOLL_CTL_MOD, fds[c], &none) < 0)
				t_die("epoll_ctl: %s", strerror(errno));
			done[c] = 1;
			left--;
		}
	}
	for (int c = lo; c < hi; c++) {
		struct epoll_event in = {.events = EPOLLIN, .data.u32 = (uint32_t)c};
		if (epoll_ctl(ep, EPOLL_CTL_MOD, fds[c], &in) < 0 || write(fds[c], "0123456789abcdef", 16) != 16)
			t_die("write: %s", strerror(errno));
	}
	while (echoed < hi - lo) {
		int k = epoll_wait(ep, ev, 64, 10000);
		if (k <= 0)
			t_die("echoes: %d of %d", echoed, hi - lo);
		for (int i = 0; i < k; i++) {
			int fd = fds[ev[i].data.u32];
			ssize_t r = read(fd, buf, sizeof(buf));
			if (r == 16 && !memcmp(buf, "0123456789abcdef", 16)) {
				echoed++;
				epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
			} else if (!(r < 0 && errno == EAGAIN)) {
				t_die("echo: %zd %s", r, r < 0 ? strerror(errno) : "");
			}
		}
	}
	free(done);
}

static const char *ename(int e)
{
	switch (e) {
	case 0: return "ok";
	case EINVAL: return "EINVAL";
	case ENOPROTOOPT: return "ENOPROTOOPT";
	case EFAULT: return "EFAULT";
	case EBADF: return "EBADF";
	case EMFILE: return "EMFILE";
	case ENFILE: return "ENFILE";
	case ENOBUFS: return "ENOBUFS";
	case ENOTSOCK: return "ENOTSOCK";
	case ECONNREFUSED: return "ECONNREFUSED";
	case ECONNRESET: return "ECONNRESET";
	case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
	case EAGAIN: return "EAGAIN";
	case ENOMEM: return "ENOMEM";
	case EPERM: return "EPERM";
	default: return "other";
	}
}

static void show_int(const char *what, int fd, int level, int name)
{
	int v = -1;
	socklen_t l = sizeof(v);
	int r = getsockopt(fd, level, name, &v, &l);
	printf("%s=%d len=%u %s\n", what, r < 0 ? -1 : v, (unsigned)l, ename(r < 0 ? errno : 0));
}

static void set_int(int fd, int level, int name, int v)
{
	if (setsockopt(fd, level, name, &v, sizeof(v)) < 0)
		printf("set %d/%d=%d: %s\n", level, name, v, ename(errno));
}

/* what a program reads back of connection fd */
static void show_opts(const char *tag, int fd)
{
	struct linger lg = {-1, -1};
	struct timeval tv = {-1, -1};
	socklen_t l;
	int fl, bad = 1, r;
	printf("[%s]\n", tag);
	show_int("SO_TYPE", fd, SOL_SOCKET, SO_TYPE);
	show_int("SO_DOMAIN", fd, SOL_SOCKET, SO_DOMAIN);
	show_int("SO_PROTOCOL", fd, SOL_SOCKET, SO_PROTOCOL);
	show_int("SO_ERROR", fd, SOL_SOCKET, SO_ERROR);
	show_int("SO_ACCEPTCONN", fd, SOL_SOCKET, SO_ACCEPTCONN);
	show_int("TCP_NODELAY", fd, IPPROTO_TCP, TCP_NODELAY);
	show_int("SO_KEEPALIVE", fd, SOL_SOCKET, SO_KEEPALIVE);
	show_int("TCP_KEEPIDLE", fd, IPPROTO_TCP, TCP_KEEPIDLE);
	show_int("TCP_KEEPINTVL", fd, IPPROTO_TCP, TCP_KEEPINTVL);
	show_int("TCP_KEEPCNT", fd, IPPROTO_TCP, TCP_KEEPCNT);
	show_int("TCP_USER_TIMEOUT", fd, IPPROTO_TCP, TCP_USER_TIMEOUT);
	show_int("IP_TOS", fd, IPPROTO_IP, IP_TOS);
	show_int("SO_REUSEADDR", fd, SOL_SOCKET, SO_REUSEADDR);
	show_int("SO_RCVLOWAT", fd, SOL_SOCKET, SO_RCVLOWAT);
	show_int("SO_RCVBUF", fd, SOL_SOCKET, SO_RCVBUF);
	l = sizeof(lg);
	r = getsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, &l);
	printf("SO_LINGER=%d,%d len=%u %s\n", lg.l_onoff, lg.l_linger, (unsigned)l, ename(r < 0 ? errno : 0));
	l = sizeof(tv);
	r = getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &l);
	printf("SO_RCVTIMEO=%ld.%06ld len=%u %s\n", (long)tv.tv_sec, (long)tv.tv_usec, (unsigned)l,
	       ename(r < 0 ? errno : 0));
	fl = fcntl(fd, F_GETFL);
	printf("O_NONBLOCK=%d O_RDWR=%d\n", !!(fl & O_NONBLOCK), (fl & O_ACCMODE) == O_RDWR);
	/* bad input gets the kernel's error */
	r = setsockopt(fd, SOL_SOCKET, SO_LINGER, &bad, 1);
	printf("bad SO_LINGER: %s\n", ename(r < 0 ? errno : 0));
	bad = -5;
	r = setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &bad, sizeof(bad));
	printf("bad TCP_KEEPIDLE: %s\n", ename(r < 0 ? errno : 0));
	r = setsockopt(fd, 9999, 1, &bad, sizeof(bad));
	printf("bad level: %s\n", ename(r < 0 ? errno : 0));
	l = sizeof(bad);
	r = getsockopt(fd, IPPROTO_TCP, 9999, &bad, &l);
	printf("unknown option: %s\n", ename(r < 0 ? errno : 0));
}

static void set_opts(int fd, int rcvbuf)
{
	struct linger lg = {1, 3};
	struct timeval tv = {2, 500000};
	set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1);
	set_int(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
	set_int(fd, IPPROTO_TCP, TCP_KEEPIDLE, 77);
	set_int(fd, IPPROTO_TCP, TCP_KEEPINTVL, 9);
	set_int(fd, IPPROTO_TCP, TCP_KEEPCNT, 4);
	set_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, 30000);
	set_int(fd, IPPROTO_IP, IP_TOS, 0x10);
	set_int(fd, SOL_SOCKET, SO_RCVBUF, rcvbuf);
	set_int(fd, SOL_SOCKET, SO_RCVLOWAT, 4);
	if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
		printf("set linger/timeout: %s\n", ename(errno));
}

static int client(int argc, char **argv)
{
	int n = 200, opts = 0, opt, ep, base, half = 0, *fds, lib;
	while ((opt = getopt(argc, argv, "n:o")) != -1) {
		if (opt == 'n')
			n = atoi(optarg);
		else
			opts = 1;
	}
	if (optind + 1 >= argc || n < 2)
		t_die("usage: polled-connections client [-n N] [-o] HOST PORT");
	if ((ep = epoll_create1(0)) < 0 || !(fds = calloc((size_t)n, sizeof(*fds))))
		t_die("epoll_create1: %s", strerror(errno));
	base = nfds();
	for (int round = 0; round < 2; round++) {
		int lo = round ? n / 2 : 0, hi = round ? n : n / 2;
		for (int i = lo; i < hi; i++) {
			struct epoll_event e = {.events = EPOLLOUT, .data.u32 = (uint32_t)i};
			/* the first one: options set before it connects */
			if (i == 0 && opts) {
				struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[optind + 1]))};
				inet_pton(AF_INET, argv[optind], &a.sin_addr);
				fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
				set_opts(fds[i], 40000);
				if (connect(fds[i], (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS)
					t_die("connect: %s", strerror(errno));
			} else if ((fds[i] = connect_to(argv[optind], atoi(argv[optind + 1]), SOCK_NONBLOCK)) < 0) {
				t_die("connect %d: %s", i, strerror(errno));
			}
			if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e) < 0)
				t_die("epoll_ctl: %s", strerror(errno));
		}
		connect_and_echo(ep, fds, lo, hi);
		if (!round)
			half = nfds();
	}
	lib = half - base - n / 2;
	printf("per_conn_x100=%d library=", (nfds() - half) * 100 / (n - n / 2));
	if (lib <= 8)
		printf("few\n");
	else
		printf("%d\n", lib);
	if (opts) {
		int on = 0;
		show_opts("set before connect", fds[0]);
		set_opts(fds[1], 50000);
		show_opts("set once polled", fds[1]);
		/* the flags the program sets are the ones it reads back */
		fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) & ~O_NONBLOCK);
		printf("cleared: O_NONBLOCK=%d\n", !!(fcntl(fds[1], F_GETFL) & O_NONBLOCK));
		on = 1;
		ioctl(fds[1], FIONBIO, &on);
		printf("FIONBIO: O_NONBLOCK=%d\n", !!(fcntl(fds[1], F_GETFL) & O_NONBLOCK));
		printf("FD_CLOEXEC=%d\n", fcntl(fds[1], F_GETFD));
		/* and the connection still works after all of it */
		if (write(fds[1], "x", 1) != 1)
			t_die("write after options: %s", strerror(errno));
		for (int i = 0; i < 100; i++) {
			char c;
			if (read(fds[1], &c, 1) == 1) {
				printf("echo after options: %c\n", c);
				break;
			}
			usleep(20000);
		}
	}
	fflush(stdout);
	return 0;
}

static int limit(const char *host, int port)
{
	int ep = epoll_create1(0), k = 0, e = 0;
	if (ep < 0)
		t_die("epoll_create1: %s", strerror(errno));
	for (;;) {
		struct epoll_event ev = {.events = EPOLLIN};
		int fd = connect_to(host, port, 0);
		if (fd < 0) {
			e = errno;
			break;
		}
		ev.data.fd = fd;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			e = errno;
			break;
		}
		k++;
	}
	printf("opened=%d first=%s\n", k, ename(e));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]));
	if (argc >= 2 && !strcmp(argv[1], "client"))
		return client(argc - 1, argv + 1);
	if (argc >= 4 && !strcmp(argv[1], "limit"))
		return limit(argv[2], atoi(argv[3]));
	t_die("usage: polled-connections server PORT | client [-n N] [-o] HOST PORT | limit HOST PORT");
}
