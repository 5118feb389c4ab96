/*
 * restart-per-handler - does a blocked accept or connect go on after a
 * handler installed with SA_RESTART, in a program that also has one
 * installed without it?  The kernel restarts the call after the handler
 * that ran, whatever the others' flags.
 *
 *   restart-per-handler accept PORT
 *       a listener on PORT and a forked child that connects to it from
 *       127.0.0.1 after 500 ms and sends one byte; the parent blocks in
 *       accept while SIGALRM (SA_RESTART) runs its handler at 100 ms, and
 *       prints "accept ok" or how accept failed, the handlers' runs, and
 *       the byte it read: "accept ok alarms 1 usr1 0 read x"
 *   restart-per-handler connect ADDR PORT
 *       (the listener of connect-interrupted -s PORT, backlog 1, never
 *       accepting) two connects that complete, then a third that waits:
 *       SIGALRM (SA_RESTART) at 100 ms, then SIGUSR1 (without it) from a
 *       thread at 400 ms, which ends it: "ok ok EINTR alarms 1 usr1 1"
 *
 * Both install SIGUSR1's handler without SA_RESTART first.  The output is
 * the same on kernel TCP and on rshare; it names outcomes, never times.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

static volatile sig_atomic_t alarms, usr1s;

static void on_alarm(int sig) { (void)sig; alarms++; }
static void on_usr1(int sig) { (void)sig; usr1s++; }

static void handlers(void)
{
	struct sigaction restart = {.sa_handler = on_alarm, .sa_flags = SA_RESTART};
	struct sigaction plain = {.sa_handler = on_usr1}; /* no SA_RESTART */
	struct itimerval it = {.it_value = {0, 100000}};
	sigemptyset(&restart.sa_mask);
	sigemptyset(&plain.sa_mask);
	sigaction(SIGUSR1, &plain, NULL);
	sigaction(SIGALRM, &restart, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
}

static const char *ename(int e)
{
	return e == EINTR ? "EINTR" : e == EAGAIN ? "EAGAIN" : e == ETIMEDOUT ? "ETIMEDOUT" : strerror(e);
}

static int do_accept(int port)
{
	int lfd = t_listen4(port), fd, st;
	char c = '?';
	pid_t child = fork();
	if (child == 0) {
		struct sockaddr_in a = t_peer4("127.0.0.1", port);
		int cfd = socket(AF_INET, SOCK_STREAM, 0);
		usleep(500000);
		if (connect(cfd, (struct sockaddr *)&a, sizeof(a)) < 0 || write(cfd, "x", 1) != 1)
			_exit(1);
		close(cfd);
		_exit(0);
	}
	handlers();
	fd = accept(lfd, NULL, NULL);
	printf("accept %s alarms %d usr1 %d", fd >= 0 ? "ok" : ename(errno), (int)alarms, (int)usr1s);
	if (fd >= 0 && read(fd, &c, 1) == 1)
		printf(" read %c", c);
	printf("\n");
	waitpid(child, &st, 0);
	return 0;
}

static void *usr1_later(void *arg)
{
	usleep(400000);
	pthread_kill(*(pthread_t *)arg, SIGUSR1);
	return NULL;
}

static int do_connect(const char *addr, int port)
{
	struct sockaddr_in a = t_peer4(addr, port);
	pthread_t me = pthread_self(), t;
	for (int i = 0; i < 2; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		printf("%s ", connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? "ok" : ename(errno));
	}
	int fd = socket(AF_INET, SOCK_STREAM, 0), r;
	sigset_t alrm, old;
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &alrm, &old); /* the thread never takes SIGALRM */
	if (pthread_create(&t, NULL, usr1_later, &me))
		t_die("pthread_create failed");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	handlers();
	r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	printf("%s alarms %d usr1 %d\n", r == 0 ? "ok" : ename(errno), (int)alarms, (int)usr1s);
	pthread_join(t, NULL);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "accept"))
		return do_accept(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "connect"))
		return do_connect(argv[2], atoi(argv[3]));
	fprintf(stderr, "usage: restart-per-handler accept PORT | connect ADDR PORT\n");
	return 2;
}
