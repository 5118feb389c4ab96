/*
 * echo-server [-w WORKERS] [-f] [-k IDLE] PORT
 *
 * Listens on 0.0.0.0:PORT (SO_REUSEADDR) and echoes every byte back until
 * EOF, then closes.  Prints "worker PID" for each pre-forked worker, then
 * "ready".  Default: WORKERS (1) pre-forked processes each loop accept() on
 * the shared listener, serving each connection in a thread of their own.
 * -f: accept-then-fork; the master accepts and forks a child per
 * connection, and closes its own copy; the child prints "child PID".
 * -k IDLE: keepalive on each connection (SO_KEEPALIVE, TCP_KEEPIDLE IDLE
 * seconds, TCP_KEEPINTVL 1, TCP_KEEPCNT 2).
 *
 * Runs until killed.  SIGTERM/SIGINT to the master end the whole process
 * group (the master makes itself a group leader); workers also die with the
 * master (PR_SET_PDEATHSIG).  Plain blocking BSD sockets: knows nothing of
 * rshare.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

static int lfd = -1;
static pid_t master;
static int ka_idle;

static void on_term(int sig)
{
	(void)sig;
	if (getpid() == master && getpgrp() == master) {
		signal(SIGTERM, SIG_IGN);
		kill(0, SIGTERM);
	}
	_exit(0);
}

static void echo_conn(int fd)
{
	static __thread uint8_t *buf;
	if (!buf)
		buf = malloc(64 << 10);
	if (!buf)
		t_die("echo-server: out of memory");
	if (ka_idle) {
		int one = 1, two = 2;
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &ka_idle, sizeof(ka_idle));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &one, sizeof(one));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &two, sizeof(two));
	}
	for (;;) {
		ssize_t n = read(fd, buf, 64 << 10);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (t_write_full(fd, buf, (size_t)n) < 0)
			break;
	}
	close(fd);
}

static void *conn_thread(void *arg)
{
	echo_conn((int)(intptr_t)arg);
	return NULL;
}

static void worker(void)
{
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE)
				continue;
			fprintf(stderr, "echo-server %d: accept: %s\n", getpid(), strerror(errno));
			_exit(1);
		}
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&a, 256 << 10);
		if (pthread_create(&t, &a, conn_thread, (void *)(intptr_t)fd)) {
			fprintf(stderr, "echo-server %d: pthread_create failed\n", getpid());
			close(fd);
		}
		pthread_attr_destroy(&a);
	}
}

static void fork_per_conn(void)
{
	signal(SIGCHLD, SIG_IGN); /* children reap themselves */
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE)
				continue;
			fprintf(stderr, "echo-server: accept: %s\n", strerror(errno));
			exit(1);
		}
		pid_t p = fork();
		if (p < 0) {
			fprintf(stderr, "echo-server: fork: %s\n", strerror(errno));
			close(fd);
			continue;
		}
		if (p == 0) {
			prctl(PR_SET_PDEATHSIG, SIGTERM);
			signal(SIGTERM, SIG_DFL);
			close(lfd);
			printf("child %d\n", getpid());
			fflush(stdout);
			echo_conn(fd);
			_exit(0);
		}
		close(fd);
	}
}

int main(int argc, char **argv)
{
	int workers = 1, forkmode = 0, opt;
	while ((opt = getopt(argc, argv, "w:fk:")) != -1) {
		switch (opt) {
		case 'w': workers = atoi(optarg); break;
		case 'f': forkmode = 1; break;
		case 'k': ka_idle = atoi(optarg); break;
		default: goto usage;
		}
	}
	if (optind != argc - 1 || workers < 1 || workers > 1024)
		goto usage;
	int port = atoi(argv[optind]);

	master = getpid();
	setpgid(0, 0); /* fails harmlessly when already a session leader */
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = {.sa_handler = on_term};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		t_die("echo-server: socket: %s", strerror(errno));
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_ANY)};
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0)
		t_die("echo-server: bind port %d: %s", port, strerror(errno));
	if (listen(lfd, 1024) < 0)
		t_die("echo-server: listen: %s", strerror(errno));

	if (forkmode) {
		printf("ready\n");
		fflush(stdout);
		fork_per_conn();
		return 0;
	}
	for (int i = 0; i < workers; i++) {
		fflush(stdout);
		pid_t p = fork();
		if (p < 0)
			t_die("echo-server: fork: %s", strerror(errno));
		if (p == 0) {
			prctl(PR_SET_PDEATHSIG, SIGTERM);
			signal(SIGTERM, SIG_DFL);
			signal(SIGINT, SIG_DFL);
			if (getppid() != master)
				_exit(0);
			worker();
		}
		printf("worker %d\n", p);
	}
	printf("ready\n");
	fflush(stdout);
	/* the master keeps its listener open, serves nothing, and waits */
	for (;;) {
		int st;
		pid_t p = wait(&st);
		if (p < 0 && errno == ECHILD)
			pause();
		else if (p > 0)
			fprintf(stderr, "echo-server: worker %d ended (status 0x%x)\n", p, st);
	}
usage:
	fprintf(stderr, "usage: echo-server [-w WORKERS] [-f] [-k IDLE] PORT\n");
	return 2;
}
