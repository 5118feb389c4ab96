/*
 * jump-out-of-send server PORT
 * jump-out-of-send client ADDR PORT MS [HOLD_MS]
 *
 * A signal handler that leaves a blocked send() with siglongjmp, as old
 * programs time out a blocking call: does the socket still carry what
 * the program sends next?
 *
 * The server accepts one connection, prints "ready" first, reads nothing
 * for 1 s, then reads until EOF and prints "server eof" (or the error).
 * The client connects, installs a SIGALRM handler that siglongjmps, arms
 * an ITIMER_REAL of MS milliseconds and sends 64 MiB in one call to the
 * server that does not read: the call blocks once the buffers are full,
 * and the handler jumps out of it.  It prints "client jumped" (or how
 * the send ended otherwise), then sends 1 MiB more, all of it ("client
 * sent more", once the server reads), waits HOLD_MS (default 0) with the
 * socket open, closes and exits 0.
 */
#include "helpers.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>

#define BIG (64u << 20)
#define MORE (1u << 20)

static sigjmp_buf out;

static void on_alarm(int sig)
{
	(void)sig;
	siglongjmp(out, 1);
}

static int server(int port)
{
	int lfd = t_listen4(port), fd;
	printf("ready\n");
	fflush(stdout);
	if ((fd = accept(lfd, NULL, NULL)) < 0)
		t_die("jump-out-of-send: accept: %s", strerror(errno));
	sleep(1);
	if (t_read_to_eof(fd) < 0) {
		printf("server read: %s\n", strerror(errno));
		return 1;
	}
	printf("server eof\n");
	return 0;
}

/* the send of BIG bytes under the alarm: 1 when the handler jumped out */
static int big_send(int fd, const char *buf, int ms, ssize_t *r)
{
	struct itimerval it = {.it_value = {.tv_sec = ms / 1000, .tv_usec = ms % 1000 * 1000}};
	if (sigsetjmp(out, 1))
		return 1;
	if (setitimer(ITIMER_REAL, &it, NULL) < 0)
		t_die("jump-out-of-send: setitimer: %s", strerror(errno));
	*r = send(fd, buf, BIG, MSG_NOSIGNAL);
	return 0;
}

static int client(const char *addr, int port, int ms, int hold_ms)
{
	struct sockaddr_in a = t_peer4(addr, port);
	struct sigaction sa = {.sa_handler = on_alarm};
	char *buf = calloc(1, BIG);
	ssize_t r = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (!buf || fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		t_die("jump-out-of-send: connect: %s", strerror(errno));
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	if (big_send(fd, buf, ms, &r))
		printf("client jumped\n");
	else
		printf("client send returned %s\n", r < 0 ? strerror(errno) : r == BIG ? "all" : "part");
	fflush(stdout);
	signal(SIGALRM, SIG_IGN);
	if (t_write_full(fd, buf, MORE) < 0)
		t_die("jump-out-of-send: send after the jump: %s", strerror(errno));
	printf("client sent more\n");
	if (hold_ms > 0)
		usleep((useconds_t)hold_ms * 1000);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]));
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), atoi(argv[4]), argc == 6 ? atoi(argv[5]) : 0);
	fprintf(stderr, "usage: jump-out-of-send server PORT | client ADDR PORT MS [HOLD_MS]\n");
	return 2;
}
