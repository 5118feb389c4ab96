/*
 * accept-pool - a pool of threads blocked in accept on one listener, as
 * thread-pool servers keep one: does every connection find a thread, and
 * do the pool's threads stop as the kernel stops them?
 *
 *   accept-pool PORT
 *       a listener on PORT and 6 threads, each accepting in a loop and
 *       answering one byte per connection; a forked child connects from
 *       127.0.0.1 300 times, one at a time, and 40 times 8 at once, each
 *       sending 'q' and reading the answer.  Then, the pool idle:
 *       SIGUSR1 (installed without SA_RESTART) to one of its threads ends
 *       that thread's accept with EINTR and no other's; SIGALRM (with
 *       SA_RESTART) to every thread ends none; pthread_cancel of 5 of the
 *       6 threads (accept is a cancellation point) ends theirs; the last
 *       one serves 100 more connections; with SO_RCVTIMEO of 200 ms on
 *       the listener, 4 threads blocked in accept at once each end with
 *       EAGAIN.  It prints one line per step (counts and errno names,
 *       never times):
 *         served 300
 *         served 320 of 320 at once
 *         usr1 EINTR 1 other 0
 *         alrm EINTR 0
 *         cancelled 5 joined 5
 *         served 100 by the last
 *         timeouts EAGAIN 4 of 4
 *
 * The output is the same on kernel TCP and on rshare.
 */
#include "helpers.h"

#include <pthread.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>

#define POOL 6

static int lfd, port;
static pthread_t pool[POOL];
static _Atomic int served, eintrs, others, stop_on_eintr;
static volatile sig_atomic_t usr1s, alrms;

static void on_usr1(int sig) { (void)sig; usr1s++; }
static void on_alrm(int sig) { (void)sig; alrms++; }

/* One thread of the pool: accept, answer, close; an EINTR is counted
 * and, once stop_on_eintr is set, ends the thread. */
static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		char c;
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR) {
				eintrs++;
				if (stop_on_eintr)
					return NULL;
				continue;
			}
			others++;
			return NULL;
		}
		if (read(fd, &c, 1) == 1 && write(fd, "a", 1) == 1)
			served++;
		close(fd);
	}
}

static int ask(void)
{
	struct sockaddr_in a = t_peer4("127.0.0.1", port);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	char c = 0;
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || write(fd, "q", 1) != 1 ||
	    read(fd, &c, 1) != 1) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	close(fd);
	return c == 'a';
}

/* N connections one at a time from a child; how many were answered */
static int clients(int n, int at_once)
{
	int ok = 0;
	for (int k = 0; k < at_once; k++) {
		if (fork() == 0) {
			int got = 0;
			for (int i = 0; i < n; i++)
				got += ask();
			_exit(got == n ? 0 : 1);
		}
	}
	for (int k = 0; k < at_once; k++) {
		int st;
		if (wait(&st) > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			ok += n;
	}
	return ok;
}

/* until the pool's threads have all gone back to accept */
static void settle(void)
{
	struct timespec t = {0, 300 * 1000000L};
	nanosleep(&t, NULL);
}

static void *timed_accept(void *arg)
{
	int fd = accept(lfd, NULL, NULL);
	(void)arg;
	if (fd >= 0)
		close(fd);
	return (void *)(long)(fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

int main(int argc, char **argv)
{
	struct sigaction plain = {.sa_handler = on_usr1}; /* no SA_RESTART */
	struct sigaction restart = {.sa_handler = on_alrm, .sa_flags = SA_RESTART};
	struct timeval tv = {0, 200000};
	pthread_t timed[4];
	int joined = 0, eagain = 0, before;
	if (argc != 2) {
		fprintf(stderr, "usage: accept-pool PORT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	port = atoi(argv[1]);
	sigaction(SIGUSR1, &plain, NULL);
	sigaction(SIGALRM, &restart, NULL);
	lfd = t_listen4(port);
	for (int i = 0; i < POOL; i++)
		if (pthread_create(&pool[i], NULL, worker, NULL))
			t_die("pthread_create");
	settle();
	printf("served %d\n", clients(300, 1));
	printf("served %d of 320 at once\n", clients(40, 8));

	/* one thread interrupted without SA_RESTART: its accept alone ends */
	settle();
	pthread_kill(pool[2], SIGUSR1);
	settle();
	printf("usr1 EINTR %d other %d\n", (int)eintrs, (int)others);
	/* every thread's handler with SA_RESTART: their accepts go on */
	for (int i = 0; i < POOL; i++)
		pthread_kill(pool[i], SIGALRM);
	settle();
	printf("alrm EINTR %d\n", (int)eintrs - 1);

	/* cancelled in accept, a cancellation point */
	for (int i = 0; i < POOL - 1; i++) {
		pthread_cancel(pool[i]);
		if (pthread_join(pool[i], NULL) == 0)
			joined++;
	}
	printf("cancelled %d joined %d\n", POOL - 1, joined);
	before = served;
	clients(100, 1);
	printf("served %d by the last\n", served - before);

	/* the last one stops at its next EINTR; then SO_RCVTIMEO */
	stop_on_eintr = 1;
	settle();
	pthread_kill(pool[POOL - 1], SIGUSR1);
	pthread_join(pool[POOL - 1], NULL);
	if (setsockopt(lfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
		t_die("SO_RCVTIMEO: %s", strerror(errno));
	for (int i = 0; i < 4; i++)
		pthread_create(&timed[i], NULL, timed_accept, NULL);
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(timed[i], &r);
		eagain += (int)(long)r;
	}
	printf("timeouts EAGAIN %d of 4\n", eagain);
	return 0;
}
