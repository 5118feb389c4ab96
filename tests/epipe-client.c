/*
 * epipe-client HOST PORT
 *
 * Against a server that closes every connection at once (epipe-server):
 * 1. connects, waits for EOF, then writes until a write fails: it must fail
 *    with EPIPE (an ECONNRESET before it is allowed), and SIGPIPE must have
 *    been delivered (the default action is replaced by a counting handler);
 * 2. connects again and does the same with send(MSG_NOSIGNAL): EPIPE, and
 *    no SIGPIPE.
 * Exit 0 when both hold, 1 if not.
 */
#include "helpers.h"

#include <netdb.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>

static volatile sig_atomic_t sigpipes;

static void on_pipe(int sig)
{
	(void)sig;
	sigpipes++;
}

static int dial(const char *host, const char *port)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
	if (getaddrinfo(host, port, &hints, &ai))
		t_die("epipe-client: bad address");
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		t_die("epipe-client: connect: %s", strerror(errno));
	freeaddrinfo(ai);
	char c;
	ssize_t n = read(fd, &c, 1);
	if (n != 0)
		t_die("epipe-client: expected EOF from the closing server, got %zd (%s)", n,
		      n < 0 ? strerror(errno) : "data");
	return fd;
}

/* Write until failure; the errno of the first failure that is not
 * ECONNRESET (that one may come first, as the peer's reset). */
static int write_until_fail(int fd, int flags, int *resets)
{
	static char buf[4096];
	for (int i = 0; i < 100000; i++) {
		ssize_t n = flags ? send(fd, buf, sizeof(buf), flags) : write(fd, buf, sizeof(buf));
		if (n >= 0)
			continue;
		if (errno == EINTR)
			continue;
		if (errno == ECONNRESET) {
			++*resets;
			continue;
		}
		return errno;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: epipe-client HOST PORT\n");
		return 2;
	}
	struct sigaction sa = {.sa_handler = on_pipe};
	sigaction(SIGPIPE, &sa, NULL);

	int resets = 0;
	int fd = dial(argv[1], argv[2]);
	int e = write_until_fail(fd, 0, &resets);
	if (e != EPIPE)
		t_die("epipe-client: write after peer close: %s, want EPIPE",
		      e ? strerror(e) : "never failed");
	if (sigpipes < 1)
		t_die("epipe-client: write failed with EPIPE but no SIGPIPE was delivered");
	/* SIGPIPE comes with every EPIPE write */
	int before = sigpipes;
	if (write(fd, "x", 1) != -1 || errno != EPIPE)
		t_die("epipe-client: second write did not fail with EPIPE");
	if (sigpipes != before + 1)
		t_die("epipe-client: second EPIPE write delivered %d SIGPIPEs", sigpipes - before);
	close(fd);
	printf("write: EPIPE with %d SIGPIPE (%d ECONNRESET first)\n", (int)sigpipes, resets);

	fd = dial(argv[1], argv[2]);
	before = sigpipes;
	resets = 0;
	e = write_until_fail(fd, MSG_NOSIGNAL, &resets);
	if (e != EPIPE)
		t_die("epipe-client: send(MSG_NOSIGNAL) after peer close: %s, want EPIPE",
		      e ? strerror(e) : "never failed");
	if (sigpipes != before)
		t_die("epipe-client: send(MSG_NOSIGNAL) delivered SIGPIPE");
	close(fd);
	printf("send(MSG_NOSIGNAL): EPIPE without SIGPIPE (%d ECONNRESET first)\n", resets);
	return 0;
}
