/*
 * respawn-server [-w WORKERS] [-b RINGBYTES] [-v] [-a] PORT
 *
 * A pre-fork echo server that keeps WORKERS workers alive: the master
 * listens on 0.0.0.0:PORT (SO_REUSEADDR; with -b, SO_RCVBUF and SO_SNDBUF
 * set to RINGBYTES before listen(), so accepted connections inherit them),
 * forks WORKERS (default 4) workers that each loop accept() on the shared
 * listener and echo every connection in a thread of their own, and forks a
 * new worker whenever one dies, however it died.
 *
 * Prints "master PID", then "worker PID" for each first worker, then
 * "ready"; later "died PID status 0xST" and "respawn PID" for each worker
 * replaced.  With -v, every connection's end is printed as one line:
 *   end PID eof bytes=N      the client shut down its side (normal)
 *   end PID reset bytes=N    read or write failed with ECONNRESET or EPIPE
 *   end PID error ERR bytes=N
 * where N is the number of bytes echoed on that connection.  With -a,
 * every connection a worker accepts is printed as "conn PID".
 *
 * Runs until killed.  SIGTERM/SIGINT to the master end the whole process
 * group; workers also die with the master (PR_SET_PDEATHSIG).  Plain
 * blocking BSD sockets: knows nothing of rshare.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

static int lfd = -1, verbose, accepts;
static pid_t master;

static void on_term(int sig)
{
	(void)sig;
	if (getpid() == master && getpgrp() == master) {
		signal(SIGTERM, SIG_IGN);
		kill(0, SIGTERM);
	}
	_exit(0);
}

/* One line in one write(2): workers share stdout's file offset. */
__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0)
		(void)!write(1, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

static void *conn_thread(void *arg)
{
	int fd = (int)(intptr_t)arg, err = 0;
	uint64_t bytes = 0;
	uint8_t *buf = malloc(64 << 10);
	if (!buf)
		t_die("respawn-server: out of memory");
	for (;;) {
		ssize_t n = read(fd, buf, 64 << 10);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			err = errno;
		if (n <= 0)
			break;
		if (t_write_full(fd, buf, (size_t)n) < 0) {
			err = errno;
			break;
		}
		bytes += (uint64_t)n;
	}
	if (verbose) {
		if (!err)
			say("end %d eof bytes=%llu\n", getpid(), (unsigned long long)bytes);
		else if (err == ECONNRESET || err == EPIPE)
			say("end %d reset bytes=%llu\n", getpid(), (unsigned long long)bytes);
		else
			say("end %d error %s bytes=%llu\n", getpid(), strerror(err), (unsigned long long)bytes);
	}
	free(buf);
	close(fd);
	return NULL;
}

static void worker(void)
{
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	if (getppid() != master)
		_exit(0);
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 256 << 10);
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE ||
			    errno == ENOMEM || errno == ENOBUFS) {
				if (errno != EINTR && errno != ECONNABORTED)
					usleep(10000);
				continue;
			}
			fprintf(stderr, "respawn-server %d: accept: %s\n", getpid(), strerror(errno));
			_exit(1);
		}
		pthread_t t;
		if (accepts)
			say("conn %d\n", getpid());
		if (pthread_create(&t, &a, conn_thread, (void *)(intptr_t)fd)) {
			fprintf(stderr, "respawn-server %d: pthread_create failed\n", getpid());
			close(fd);
		}
	}
}

static pid_t spawn(void)
{
	for (int tries = 0;; tries++) {
		pid_t p = fork();
		if (p == 0) {
			worker();
			_exit(0);
		}
		if (p > 0)
			return p;
		if (tries > 100)
			t_die("respawn-server: fork: %s", strerror(errno));
		usleep(10000);
	}
}

int main(int argc, char **argv)
{
	int workers = 4, ring = 0, opt;
	while ((opt = getopt(argc, argv, "w:b:va")) != -1) {
		switch (opt) {
		case 'w': workers = atoi(optarg); break;
		case 'b': ring = atoi(optarg); break;
		case 'v': verbose = 1; break;
		case 'a': accepts = 1; break;
		default: goto usage;
		}
	}
	if (optind != argc - 1 || workers < 1 || workers > 1024 || ring < 0)
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
		t_die("respawn-server: socket: %s", strerror(errno));
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ring && (setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &ring, sizeof(ring)) < 0 ||
		     setsockopt(lfd, SOL_SOCKET, SO_SNDBUF, &ring, sizeof(ring)) < 0))
		t_die("respawn-server: SO_RCVBUF/SO_SNDBUF %d: %s", ring, strerror(errno));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_ANY)};
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0)
		t_die("respawn-server: bind port %d: %s", port, strerror(errno));
	if (listen(lfd, 4096) < 0)
		t_die("respawn-server: listen: %s", strerror(errno));

	say("master %d\n", master);
	for (int i = 0; i < workers; i++)
		say("worker %d\n", spawn());
	say("ready\n");
	for (;;) {
		int st;
		pid_t p = wait(&st);
		if (p < 0) {
			if (errno != EINTR)
				t_die("respawn-server: wait: %s", strerror(errno));
			continue;
		}
		say("died %d status 0x%x\n", p, st);
		say("respawn %d\n", spawn());
	}
usage:
	fprintf(stderr, "usage: respawn-server [-w WORKERS] [-b RINGBYTES] [-v] [-a] PORT\n");
	return 2;
}
