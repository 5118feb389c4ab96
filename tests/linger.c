/*
 * linger - close with SO_LINGER on and a time: the last close of a socket
 * waits for the peer to have the bytes written, at most that long.
 *
 *   linger -s PORT          the reader: prints "ready", then a child per
 *                           connection reads it as its first line asks:
 *                           "late": nothing for 2 s, then to the end;
 *                           "never": nothing for 3 s, then to the end
 *   linger -c ADDR PORT     the writer: one line per case
 *
 * The cases, each on a connection of its own, written to until the
 * buffers are full (one blocking send of 4 MiB under SO_SNDTIMEO 300 ms:
 * the peer does not read yet, so some of it):
 *   off      SO_LINGER off: close returns at once, whatever is unsent
 *   drain    SO_LINGER 10 s, the reader "late": close waits until the
 *            reader took enough that the last bytes reached it, less than
 *            the 10 s, and returns 0
 *   timeout  SO_LINGER 1 s, the reader "never": close returns 0 once the
 *            second is up (the bytes still go after it: Linux keeps the
 *            connection)
 *   shared   SO_LINGER 1 s, the same, but a forked child holds the socket
 *            too: the parent's close is not the last, and returns at once;
 *            the child's waits
 * A close that took less than 200 ms "returned", else it "waited", with
 * the time checked where the case bounds it.  Every line is the same on
 * kernel TCP and on rshare across nodes
 * (tests/so-linger-close-waits-as-on-kernel-tcp.bats).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

#define TOTAL (4 << 20)

static void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void serve(int fd)
{
	static char buf[128 << 10];
	char line[16];
	size_t n = 0;
	while (n < sizeof(line) - 1 && read(fd, line + n, 1) == 1 && line[n] != '\n')
		n++;
	line[n] = 0;
	if (!strcmp(line, "never"))
		msleep(3000);
	if (!strcmp(line, "late"))
		msleep(2000);
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	_exit(0);
}

static int server(int port)
{
	t_serve_forked(t_listen4(port), serve);
}

static struct sockaddr_in peer;

/* a connection whose reader reads as MODE says, with SO_LINGER ON, SECS,
 * written to until its buffers are full */
static int open_conn(const char *mode, int on, int secs)
{
	static char buf[TOTAL];
	struct linger lg = {on, secs};
	struct timeval tv = {0, 300000};
	char line[16];
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&peer, sizeof(peer)) < 0)
		t_die("connect: %s", strerror(errno));
	snprintf(line, sizeof(line), "%s\n", mode);
	if (t_write_full(fd, line, strlen(line)) < 0 || setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		t_die("set up: %s", strerror(errno));
	if (send(fd, buf, TOTAL, 0) <= 0) /* a part, once the time is up */
		t_die("send: %s", strerror(errno));
	return fd;
}

/* close, timed: its result and class, and whether it took LO to HI s */
static void timed_close(const char *what, int fd, double lo, double hi)
{
	double t0 = now(), t;
	int r = close(fd);
	t = now() - t0;
	printf("%s: close %s, %s", what, r < 0 ? strerror(errno) : "0", t < 0.2 ? "returned" : "waited");
	if (hi > 0)
		printf(" (%s)", t >= lo && t < hi ? "in time" : "NOT in time");
	printf("\n");
}

static void case_shared(void)
{
	int fd = open_conn("never", 1, 1), st;
	pid_t c = fork();
	if (c == 0) {
		msleep(500);
		timed_close("shared: the child's", fd, 0.8, 2.5);
		_exit(0);
	}
	timed_close("shared: the parent's", fd, 0, 0);
	waitpid(c, &st, 0);
}

static int client(const char *addr, int port)
{
	peer = t_peer4(addr, port);
	timed_close("off", open_conn("late", 0, 0), 0, 0);
	timed_close("drain", open_conn("late", 1, 10), 0.2, 9);
	timed_close("timeout", open_conn("never", 1, 1), 0.8, 2.5);
	case_shared();
	return 0;
}

int main(int argc, char **argv)
{
	return t_serve_or_ask(argc, argv, "linger -s PORT | linger -c ADDR PORT", server, client);
}
