/*
 * accept-jump PORT: a process of a pool of two, blocked in accept on the
 * listener they share, leaves it with siglongjmp from a SIGALRM handler,
 * then blocks in accept once more and leaves with EINTR from a handler
 * that returns; the other process serves a connection, and both stop at
 * a shutdown of the listener.  Prints what each step gave (the same on
 * kernel TCP and under rshare); the first process's pid goes to stderr,
 * so that a test can look for it in the hub's log.
 * See tests/a-pre-fork-pool-blocked-in-accept-wakes-one-process-a-connection-as-on-kernel-tcp.bats.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static sigjmp_buf jump;
static volatile sig_atomic_t jumping;

static void on_alarm(int sig)
{
	(void)sig;
	if (jumping)
		siglongjmp(jump, 1);
}

static void alarm_in(long ms)
{
	struct itimerval t = {.it_value = {ms / 1000, (ms % 1000) * 1000}};
	setitimer(ITIMER_REAL, &t, NULL);
}

static void die(const char *what)
{
	printf("%s: %s\n", what, strerror(errno));
	exit(1);
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sigaction sa;
	char buf[8];
	int l, c, st;
	pid_t kid;
	if (argc != 2)
		return 2;
	a.sin_port = htons((unsigned short)atoi(argv[1]));
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 16) < 0)
		die("listen");
	kid = fork();
	if (kid < 0)
		die("fork");
	if (kid == 0) { /* the other process of the pool: serves until the shutdown */
		int n = 0;
		while ((c = accept(l, NULL, NULL)) >= 0) {
			ssize_t r = read(c, buf, sizeof(buf));
			if (r > 0 && write(c, buf, (size_t)r) != r)
				_exit(3);
			close(c);
			n++;
		}
		_exit(n == 1 ? 0 : 4);
	}
	fprintf(stderr, "pid %d\n", (int)getpid());
	fflush(stderr);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm; /* no SA_RESTART: a handler that returns ends accept with EINTR */
	sigaction(SIGALRM, &sa, NULL);
	usleep(200000); /* the other one asleep in accept first */
	if (sigsetjmp(jump, 1) == 0) {
		jumping = 1;
		alarm_in(300);
		c = accept(l, NULL, NULL);
		printf("accept returned %d before the alarm\n", c);
		return 1;
	}
	jumping = 0;
	printf("jumped out of a blocking accept\n");
	alarm_in(300);
	c = accept(l, NULL, NULL);
	printf("the next blocking accept: %s\n", c < 0 ? strerror(errno) : "a connection");
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) < 0 || write(c, "ping", 4) != 4)
		die("connect");
	printf("the other process echoed %.*s\n", (int)(read(c, buf, sizeof(buf)) > 0 ? 4 : 0), buf);
	close(c);
	shutdown(l, SHUT_RDWR);
	if (waitpid(kid, &st, 0) != kid)
		die("waitpid");
	printf("the other process served 1 and stopped at the shutdown: %s\n",
	       WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "yes" : "no");
	return 0;
}
