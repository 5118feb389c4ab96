/*
 * accept-flags-read-back: what a program reads back from the connections
 * it accepts each way (accept; accept4 with SOCK_NONBLOCK, as event loops
 * accept; with SOCK_NONBLOCK | SOCK_CLOEXEC; with SOCK_CLOEXEC; accept
 * from a nonblocking listener, then O_NONBLOCK set, as asyncio does), in one
 * process that connects to its own listener on 127.0.0.1: the descriptor
 * number it gets, its flags, the socket's type and the options it takes
 * from its listener, its names, and its readiness in an epoll set while
 * data comes, is read, goes back, and the peer closes; then a nonblocking
 * one made blocking again with fcntl.  One line a thing read back, never
 * a time: run with and without rshare, the transcripts must be the same.
 *   accept-flags-read-back PORT
 * Plain BSD sockets: knows nothing of rshare.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

static const struct {
	const char *name;
	int flags, plain, nbl; /* nbl: the listener nonblocking, the connection made so after */
} modes[] = {
	{"accept", 0, 1, 0},
	{"accept4 NONBLOCK", SOCK_NONBLOCK, 0, 0},
	{"accept4 NONBLOCK|CLOEXEC", SOCK_NONBLOCK | SOCK_CLOEXEC, 0, 0},
	{"accept4 CLOEXEC", SOCK_CLOEXEC, 0, 0},
	{"accept from a nonblocking listener", 0, 1, 1},
};

static const char *mode; /* the one under way: every line names it */

static void say(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const char *what, const char *fmt, ...)
{
	va_list ap;
	printf("%s: %s ", mode, what);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static void say_int(int fd, const char *what, int level, int name)
{
	int v = -1;
	socklen_t l = sizeof(v);
	if (getsockopt(fd, level, name, &v, &l) < 0)
		say(what, "%s", strerror(errno));
	else
		say(what, "%d", v != 0 && name != SO_TYPE && name != SO_DOMAIN && name != SO_PROTOCOL ? 1 : v);
}

static void say_events(int ep, int ms, const char *what)
{
	struct epoll_event e = {0};
	int n = epoll_wait(ep, &e, 1, ms);
	say(what, "n=%d%s%s%s%s%s", n, (e.events & EPOLLIN) ? " IN" : "", (e.events & EPOLLOUT) ? " OUT" : "",
	    (e.events & EPOLLRDHUP) ? " RDHUP" : "", (e.events & EPOLLHUP) ? " HUP" : "",
	    (e.events & EPOLLERR) ? " ERR" : "");
}

static void say_read(int fd, const char *what)
{
	char buf[64];
	ssize_t n = read(fd, buf, sizeof(buf));
	if (n < 0)
		say(what, "%s", errno == EAGAIN ? "EAGAIN" : strerror(errno));
	else
		say(what, "%zd '%.*s'", n, (int)n, buf);
}

static void one(int l, const struct sockaddr_in *a, int flags, int plain, int nbl)
{
	struct sockaddr_in me, peer, name;
	socklen_t ml = sizeof(me), pl = sizeof(peer), nl = sizeof(name);
	struct timeval tv = {0, 0};
	socklen_t tl = sizeof(tv);
	struct stat st;
	char buf[8];
	int c = socket(AF_INET, SOCK_STREAM, 0), low, fd, ep;
	if (c < 0 || connect(c, (const struct sockaddr *)a, sizeof(*a)) < 0 ||
	    getsockname(c, (struct sockaddr *)&me, &ml) < 0)
		t_die("connect: %s", strerror(errno));
	if ((low = open("/dev/null", O_RDONLY)) < 0)
		t_die("open: %s", strerror(errno));
	close(low);
	if (nbl && fcntl(l, F_SETFL, O_NONBLOCK) < 0)
		t_die("fcntl: %s", strerror(errno));
	fd = plain ? accept(l, NULL, NULL) : accept4(l, NULL, NULL, flags);
	if (fd < 0)
		t_die("accept: %s", strerror(errno));
	if (nbl) {
		say("O_NONBLOCK as accepted", "%d", (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0);
		if (fcntl(l, F_SETFL, 0) < 0 || fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
			t_die("fcntl: %s", strerror(errno));
		flags = SOCK_NONBLOCK; /* from now on as one accepted so */
		plain = 0;
	}
	say("the lowest free descriptor", "%s", fd == low ? "yes" : "no");
	say("FD_CLOEXEC", "%d", (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
	say("O_NONBLOCK", "%d", (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0);
	say("a socket", "%d", fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode));
	say_int(fd, "SO_TYPE", SOL_SOCKET, SO_TYPE);
	say_int(fd, "SO_DOMAIN", SOL_SOCKET, SO_DOMAIN);
	say_int(fd, "SO_PROTOCOL", SOL_SOCKET, SO_PROTOCOL);
	say_int(fd, "SO_ACCEPTCONN", SOL_SOCKET, SO_ACCEPTCONN);
	say_int(fd, "SO_KEEPALIVE (the listener's)", SOL_SOCKET, SO_KEEPALIVE);
	say_int(fd, "TCP_NODELAY (the listener's)", IPPROTO_TCP, TCP_NODELAY);
	if (getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &tl) < 0)
		say("SO_RCVTIMEO (the listener's)", "%s", strerror(errno));
	else
		say("SO_RCVTIMEO (the listener's)", "%ld.%06ld", (long)tv.tv_sec, (long)tv.tv_usec);
	say("its name is the listener's", "%d",
	    getsockname(fd, (struct sockaddr *)&name, &nl) == 0 && name.sin_port == a->sin_port &&
		    name.sin_addr.s_addr == a->sin_addr.s_addr);
	say("its peer is the client", "%d",
	    getpeername(fd, (struct sockaddr *)&peer, &pl) == 0 && peer.sin_port == me.sin_port &&
		    peer.sin_addr.s_addr == me.sin_addr.s_addr);
	if ((ep = epoll_create1(0)) < 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &(struct epoll_event){.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP}) < 0)
		t_die("epoll: %s", strerror(errno));
	say_events(ep, 0, "epoll, nothing sent");
	if (write(c, "hello", 5) != 5)
		t_die("write: %s", strerror(errno));
	say_events(ep, 5000, "epoll, 5 bytes sent");
	say_read(fd, "read");
	if (!plain && (flags & SOCK_NONBLOCK))
		say_read(fd, "read again");
	say_events(ep, 0, "epoll, read");
	if (write(fd, "world", 5) != 5 || read(c, buf, sizeof(buf)) != 5 || memcmp(buf, "world", 5))
		t_die("write back: %s", strerror(errno));
	/* the end of the stream is waited for as a program waits for it: on
	 * kernel TCP over loopback the peer's close has raised it already,
	 * on rshare it comes through the hub a moment later (level-triggered
	 * OUT alone would end the wait before it) */
	close(c);
	if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &(struct epoll_event){.events = EPOLLIN | EPOLLRDHUP}) < 0)
		t_die("epoll_ctl: %s", strerror(errno));
	say_events(ep, 5000, "epoll IN, the peer closed");
	if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &(struct epoll_event){.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP}) < 0)
		t_die("epoll_ctl: %s", strerror(errno));
	say_events(ep, 0, "epoll, the peer closed");
	say_read(fd, "read at the end");
	if (flags & SOCK_NONBLOCK) {
		say("fcntl back to blocking", "%d", fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK));
		say("O_NONBLOCK", "%d", (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0);
		say_read(fd, "read at the end, blocking");
	}
	close(ep);
	close(fd);
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct timeval tv = {2, 500000};
	int one_ = 1, l;
	if (argc != 2)
		t_die("usage: accept-flags-read-back PORT");
	a.sin_port = htons((uint16_t)atoi(argv[1]));
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one_, sizeof(one_)) < 0 ||
	    setsockopt(l, SOL_SOCKET, SO_KEEPALIVE, &one_, sizeof(one_)) < 0 ||
	    setsockopt(l, IPPROTO_TCP, TCP_NODELAY, &one_, sizeof(one_)) < 0 ||
	    setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 8) < 0)
		t_die("listen: %s", strerror(errno));
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		mode = modes[i].name;
		one(l, &a, modes[i].flags, modes[i].plain, modes[i].nbl);
	}
	printf("end\n");
	return 0;
}
