/*
 * sleeps-per-answer server PORT
 * sleeps-per-answer client HOST PORT sink|stall ROUNDS
 *
 * How often a thread blocked on one direction of a connection goes to
 * sleep while the other direction is busy: on kernel TCP a blocked recv
 * wakes for bytes to read and a blocked send for room to write, not for
 * the traffic of the other direction, and the same program over rshare
 * must sleep as often.
 *
 * The client connects, sends one byte that names the mode, and starts a
 * writer thread that writes 64 KiB blocks until the process ends.  The
 * server answers with ROUNDS + 1 answers of 64 bytes, 20 ms apart, after
 * 300 ms (by then a writer that can block has).  In sink mode a thread of
 * the server reads and discards everything, so the writer streams and the
 * client's reader (its main thread) blocks between answers; in stall mode
 * the server reads nothing more, so the writer blocks on a full send
 * buffer while the answers come.  From the first answer to the last the
 * client counts the voluntary context switches of the reader (sink) or of
 * the writer (stall), /proc/self/task/TID/status, and prints
 * "sleeps per answer: N", N the count divided by ROUNDS and rounded: 1
 * (sink) and 0 (stall) on kernel TCP.  Then it ends, the writer with it.
 * The server prints "ready" once listening and serves one client at a
 * time.  Exit 0, or 1 on any error.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#define MSG 64
#define BLOCK 65536

static void *sink(void *arg)
{
	static uint8_t buf[BLOCK];
	int fd = (int)(intptr_t)arg;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	return NULL;
}

static void serve_one(int fd)
{
	uint8_t mode, msg[MSG] = {0};
	pthread_t t;
	int rounds;
	if (read(fd, &mode, 1) != 1 || read(fd, &rounds, sizeof(rounds)) != (ssize_t)sizeof(rounds))
		return;
	if (mode == 's' && pthread_create(&t, NULL, sink, (void *)(intptr_t)fd))
		t_die("sleeps-per-answer: pthread_create");
	usleep(300000);
	for (int i = 0; i <= rounds; i++) {
		memcpy(msg, &i, sizeof(i));
		if (t_write_full(fd, msg, MSG) < 0)
			break;
		usleep(20000);
	}
	if (mode == 's') {
		pthread_join(t, NULL);
	} else {
		shutdown(fd, SHUT_WR);
		sink((void *)(intptr_t)fd);
	}
}

static int serve(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 16) < 0)
		t_die("sleeps-per-answer: listen on %d: %s", port, strerror(errno));
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			t_die("sleeps-per-answer: accept: %s", strerror(errno));
		serve_one(fd);
		close(fd);
	}
}

static int cfd;
static _Atomic int writer_tid;

static void *writer(void *arg)
{
	static uint8_t buf[BLOCK];
	(void)arg;
	writer_tid = (int)syscall(SYS_gettid);
	memset(buf, 'w', sizeof(buf));
	while (t_write_full(cfd, buf, sizeof(buf)) == 0)
		;
	return NULL;
}

/* voluntary context switches of thread TID so far */
static long nvcsw(int tid)
{
	char path[64], line[256];
	long v = -1;
	FILE *f;
	snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
	if (!(f = fopen(path, "r")))
		t_die("sleeps-per-answer: %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
			break;
	fclose(f);
	if (v < 0)
		t_die("sleeps-per-answer: no voluntary_ctxt_switches in %s", path);
	return v;
}

static int ask(const char *host, int port, const char *mode, int rounds)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	uint8_t m = strcmp(mode, "sink") ? 'x' : 's', ans[MSG];
	pthread_t t;
	long before = 0;
	int tid = 0;
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	if (cfd < 0 || inet_pton(AF_INET, host, &a.sin_addr) != 1 || connect(cfd, (struct sockaddr *)&a, sizeof(a)) < 0)
		t_die("sleeps-per-answer: connect to %s:%d: %s", host, port, strerror(errno));
	if (t_write_full(cfd, &m, 1) < 0 || t_write_full(cfd, &rounds, sizeof(rounds)) < 0)
		t_die("sleeps-per-answer: write: %s", strerror(errno));
	if (pthread_create(&t, NULL, writer, NULL))
		t_die("sleeps-per-answer: pthread_create");
	for (int i = 0; i <= rounds; i++) {
		int got;
		if (t_read_full(cfd, ans, MSG) != MSG)
			t_die("sleeps-per-answer: answer %d: %s", i, errno ? strerror(errno) : "EOF");
		memcpy(&got, ans, sizeof(got));
		if (got != i)
			t_die("sleeps-per-answer: answer %d says %d", i, got);
		if (i == 0) {
			while (!writer_tid)
				usleep(1000);
			tid = m == 's' ? (int)syscall(SYS_gettid) : writer_tid;
			before = nvcsw(tid);
		}
	}
	printf("sleeps per answer: %ld\n", (nvcsw(tid) - before + rounds / 2) / rounds);
	printf("answers: %d ok\n", rounds + 1);
	fflush(stdout);
	_exit(0);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		return serve(atoi(argv[2]));
	if (argc == 6 && !strcmp(argv[1], "client") && (!strcmp(argv[4], "sink") || !strcmp(argv[4], "stall")))
		return ask(argv[2], atoi(argv[3]), argv[4], atoi(argv[5]));
	fprintf(stderr, "usage: sleeps-per-answer server PORT | client HOST PORT sink|stall ROUNDS\n");
	return 1;
}
