/*
 * listen-server rebind PORT
 * listen-server backlog PORT BACKLOG GOFILE N
 *
 * Echo servers (every byte back until EOF, a thread per connection) that
 * exercise listen(2) and bind(2) the way servers do.  Plain BSD sockets:
 * they know nothing of rshare.
 *
 * rebind: listens on 0.0.0.0:PORT with SO_REUSEADDR, prints "ready",
 * accepts one connection and keeps serving it, closes the listener, and at
 * once binds PORT again: first without SO_REUSEADDR (while that accepted
 * connection is still open), printing "bind-noreuse ok" or
 * "bind-noreuse ERRNO-NAME" and closing that socket; then with
 * SO_REUSEADDR, printing "bind-reuse ok" or "bind-reuse ERRNO-NAME".  When
 * the second bind worked it listens, prints "relistening", accepts one
 * more connection and serves it.  Prints "served N" when the N accepted
 * connections all reached EOF, and exits 0.
 *
 * backlog: listens on 0.0.0.0:PORT (SO_REUSEADDR) with BACKLOG, prints
 * "ready", and does not accept until GOFILE exists (at most 120 s); then
 * accepts N connections ("accepted N"), serves them, prints "served N"
 * when all reached EOF, and exits 0.
 *
 * Exit 1 on any unexpected error.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

static void *serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	uint8_t *buf = malloc(64 << 10);
	if (!buf)
		t_die("listen-server: out of memory");
	for (;;) {
		ssize_t n = read(fd, buf, 64 << 10);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			t_die("listen-server: read: %s", strerror(errno));
		if (n == 0)
			break;
		if (t_write_full(fd, buf, (size_t)n) < 0)
			t_die("listen-server: write: %s", strerror(errno));
	}
	close(fd);
	free(buf);
	return NULL;
}

static pthread_t threads[256];
static int nthreads;

static void accept_one(int lfd)
{
	int fd;
	do
		fd = accept(lfd, NULL, NULL);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		t_die("listen-server: accept: %s", strerror(errno));
	if (nthreads == 256 || pthread_create(&threads[nthreads++], NULL, serve, (void *)(intptr_t)fd))
		t_die("listen-server: pthread_create failed");
}

static void join_all(void)
{
	for (int i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	printf("served %d\n", nthreads);
	fflush(stdout);
}

/* A socket bound to 0.0.0.0:port, with or without SO_REUSEADDR; -errno. */
static int bound(int port, int reuse)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		t_die("listen-server: socket: %s", strerror(errno));
	if (reuse && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		t_die("listen-server: SO_REUSEADDR: %s", strerror(errno));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static const char *result(int r)
{
	return r >= 0 ? "ok" : strerrorname_np(-r) ? strerrorname_np(-r) : "?";
}

static int say(const char *s)
{
	printf("%s\n", s);
	return fflush(stdout);
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc == 3 && !strcmp(argv[1], "rebind")) {
		int port = atoi(argv[2]), lfd = bound(port, 1), fd;
		if (lfd < 0 || listen(lfd, 16) < 0)
			t_die("listen-server: listen on %d: %s", port, strerror(lfd < 0 ? -lfd : errno));
		say("ready");
		accept_one(lfd);
		if (close(lfd) < 0)
			t_die("listen-server: close of the listener: %s", strerror(errno));
		fd = bound(port, 0);
		printf("bind-noreuse %s\n", result(fd));
		if (fd >= 0)
			close(fd);
		fd = bound(port, 1);
		printf("bind-reuse %s\n", result(fd));
		fflush(stdout);
		if (fd >= 0) {
			if (listen(fd, 16) < 0)
				t_die("listen-server: listen again: %s", strerror(errno));
			say("relistening");
			accept_one(fd);
		}
		join_all();
		return 0;
	}
	if (argc == 6 && !strcmp(argv[1], "backlog")) {
		int port = atoi(argv[2]), backlog = atoi(argv[3]), n = atoi(argv[5]);
		int lfd = bound(port, 1);
		if (lfd < 0 || listen(lfd, backlog) < 0)
			t_die("listen-server: listen on %d: %s", port, strerror(lfd < 0 ? -lfd : errno));
		say("ready");
		t_wait_file(argv[4], 120);
		for (int i = 0; i < n; i++)
			accept_one(lfd);
		printf("accepted %d\n", n);
		fflush(stdout);
		join_all();
		return 0;
	}
	fprintf(stderr, "usage: listen-server rebind PORT\n"
			"       listen-server backlog PORT BACKLOG GOFILE N\n");
	return 2;
}
