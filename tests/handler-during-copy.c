/*
 * handler-during-copy server PORT
 * handler-during-copy source PORT MS
 * handler-during-copy client ADDR PORT send|jump|recv MS [sigaction|sigset|bsd_signal]
 *
 * A signal handler that runs while a send() or recv() copies the
 * program's bytes: one that sends or receives on the same socket itself
 * (both are async-signal-safe), or one that leaves the send with
 * siglongjmp, as old programs time out a call.  Does the socket go on
 * carrying every byte, with no hang?
 *
 * The server accepts one connection, prints "ready" first, reads until
 * EOF and prints "server got N" (bytes).  The source accepts one, prints
 * "ready", sends 256 KiB at a time for MS milliseconds, closes and prints
 * "source sent N".  The client connects, installs a SIGALRM handler
 * (sigaction with SA_RESTART; or sigset(3), which sets no SA_RESTART, or
 * bsd_signal(3), as the last argument says) and arms an ITIMER_REAL every
 * 50 us.  send: for MS
 * milliseconds it sends 256 KiB at a time, and the handler sends one byte
 * on the socket each time; jump: the same, but the handler jumps back to
 * the loop when it lands inside the send call; recv (to a source): it
 * reads 64 KiB at a time until EOF, and the handler takes one byte
 * (MSG_DONTWAIT) each time.  Then the client stops the timer, closes, and
 * prints "client main=M handler=H jumps=J": M the bytes its calls
 * returned, H the handler's bytes, J the sends left by a jump (their
 * bytes, up to 256 KiB each, went or not).  The test checks N == M + H
 * (send, recv) or M <= N <= M + J * 256 KiB (jump).
 */
#include "helpers.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#define CHUNK (256u << 10)

static int sfd = -1;
static volatile sig_atomic_t in_send, jump_mode, recv_mode;
static volatile long hbytes;
static sigjmp_buf back;

static void on_alarm(int sig)
{
	(void)sig;
	if (jump_mode) {
		if (in_send) {
			in_send = 0;
			siglongjmp(back, 1);
		}
		return;
	}
	int e = errno;
	char c;
	if (recv_mode ? recv(sfd, &c, 1, MSG_DONTWAIT) == 1 : send(sfd, "h", 1, MSG_NOSIGNAL) == 1)
		hbytes++;
	errno = e;
}

static int server(int port)
{
	int lfd = t_listen4(port), fd;
	long long got;
	printf("ready\n");
	fflush(stdout);
	if ((fd = accept(lfd, NULL, NULL)) < 0)
		t_die("handler-during-copy: accept: %s", strerror(errno));
	if ((got = t_read_to_eof(fd)) < 0) {
		printf("server read: %s\n", strerror(errno));
		return 1;
	}
	printf("server got %lld\n", got);
	return 0;
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int source(int port, int ms)
{
	int lfd = t_listen4(port), fd;
	char *buf = calloc(1, CHUNK);
	long long sent = 0;
	double end;
	printf("ready\n");
	fflush(stdout);
	if (!buf || (fd = accept(lfd, NULL, NULL)) < 0)
		t_die("handler-during-copy: accept: %s", strerror(errno));
	end = now_ms() + ms;
	while (now_ms() < end) {
		ssize_t n = send(fd, buf, CHUNK, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			printf("source send: %s\n", strerror(errno));
			return 1;
		}
		sent += n;
	}
	close(fd);
	printf("source sent %lld\n", sent);
	return 0;
}

sighandler_t bsd_signal(int sig, sighandler_t h); /* not declared with _GNU_SOURCE */

/* the handler of SIGALRM, installed the way HOW says */
static void install(const char *how)
{
	struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = SA_RESTART};
	sighandler_t r = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	if (!strcmp(how, "sigset")) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
		r = sigset(SIGALRM, on_alarm);
#pragma GCC diagnostic pop
	} else if (!strcmp(how, "bsd_signal"))
		r = bsd_signal(SIGALRM, on_alarm);
	else if (sigaction(SIGALRM, &sa, NULL) < 0)
		r = SIG_ERR;
	if (r == SIG_ERR)
		t_die("handler-during-copy: %s: %s", how, strerror(errno));
}

static int client(const char *addr, int port, const char *mode, int ms, const char *how)
{
	struct sockaddr_in a = t_peer4(addr, port);
	struct itimerval it = {.it_interval = {.tv_usec = 50}, .it_value = {.tv_usec = 50}};
	struct itimerval off = {{0, 0}, {0, 0}};
	char *buf = calloc(1, CHUNK);
	volatile long long main_bytes = 0;
	volatile long jumps = 0;
	double end;
	sfd = socket(AF_INET, SOCK_STREAM, 0);
	if (!buf || sfd < 0 || connect(sfd, (struct sockaddr *)&a, sizeof(a)) < 0)
		t_die("handler-during-copy: connect: %s", strerror(errno));
	jump_mode = !strcmp(mode, "jump");
	recv_mode = !strcmp(mode, "recv");
	install(how);
	if (setitimer(ITIMER_REAL, &it, NULL) < 0)
		t_die("handler-during-copy: setitimer: %s", strerror(errno));
	end = now_ms() + ms;
	while (recv_mode) {
		ssize_t r = recv(sfd, buf, 1 << 16, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			t_die("handler-during-copy: recv: %s", strerror(errno));
		if (r == 0)
			break;
		main_bytes += r;
	}
	while (!recv_mode && now_ms() < end) {
		ssize_t r;
		if (sigsetjmp(back, 1)) {
			jumps++;
			continue;
		}
		in_send = 1;
		r = send(sfd, buf, CHUNK, MSG_NOSIGNAL);
		in_send = 0;
		if (r < 0 && errno != EINTR)
			t_die("handler-during-copy: send: %s", strerror(errno));
		if (r > 0)
			main_bytes += r;
	}
	setitimer(ITIMER_REAL, &off, NULL);
	signal(SIGALRM, SIG_IGN);
	close(sfd);
	printf("client main=%lld handler=%ld jumps=%ld\n", (long long)main_bytes, (long)hbytes,
	       (long)jumps);
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "source"))
		return source(atoi(argv[2]), atoi(argv[3]));
	if ((argc == 6 || (argc == 7 && (!strcmp(argv[6], "sigaction") || !strcmp(argv[6], "sigset") ||
					 !strcmp(argv[6], "bsd_signal")))) &&
	    !strcmp(argv[1], "client") &&
	    (!strcmp(argv[4], "send") || !strcmp(argv[4], "jump") || !strcmp(argv[4], "recv")))
		return client(argv[2], atoi(argv[3]), argv[4], atoi(argv[5]), argc == 7 ? argv[6] : "sigaction");
	fprintf(stderr, "usage: handler-during-copy server PORT | source PORT MS | client ADDR PORT send|jump|recv MS "
			"[sigaction|sigset|bsd_signal]\n");
	return 2;
}
