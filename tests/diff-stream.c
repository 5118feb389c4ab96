/*
 * diff-stream - one randomized socket program, generated from a seed, for
 * the differential test against kernel TCP (tests/diff-stream-matches-
 * kernel-tcp.bats).  The same seed run on kernel TCP and on rshare must
 * print the same transcript.
 *   diff-stream [-T] [-X] -s SEED PORT        the server (prints "ready")
 *   diff-stream [-T] [-X] -c SEED ADDR PORT   the client
 *   diff-stream [-X] -p SEED                  print the generated program
 * From the seed both sides derive the same program: a few connections,
 * each a list of steps.  The client opens the connections one after the
 * other (blocking or nonblocking connect), then forks a child for each;
 * the server forks a child per accepted connection (fork-per-connection),
 * so several processes and forked children run at once.  With -T each
 * side runs its connections in threads of one process instead (a thread
 * per connection, started as the connection comes), so that one thread
 * closes a connection while another accepts or waits on the next.  Steps:
 *   data    one side writes N bytes (1 B to 4 MiB, in chunks, so several
 *           writes come before the reads), blocking or nonblocking with
 *           poll; the other reads them with read, or nonblocking with
 *           poll, select or epoll; every byte is checked;
 *   both    both sides write N bytes before either reads (pipelining);
 *   intr    the reader blocks in read with nothing coming, a SIGALRM
 *           without SA_RESTART interrupts it (EINTR), then it sends one
 *           byte that lets the other side go on;
 *   jump    as intr, but the handler leaves the read with siglongjmp (an
 *           old program's timeout), and the connection goes on;
 * and each connection ends, after a barrier (one byte each way, so that
 * nothing is in flight), one way:
 *   fin     one side shuts down for writing, the other reads EOF, answers
 *           with N bytes and closes; the first reads them, then EOF;
 *   unread  one side writes, the other closes with that data unread: the
 *           writer's next read fails with ECONNRESET;
 *   linger0 one side closes with SO_LINGER 0: the other's read fails with
 *           ECONNRESET.
 * With -X the same program uses more of the socket calls, drawn from a
 * second stream of the seed (so a seed without -X stays the program it
 * was; a third turns some intr steps into jump; a fourth has the server
 * accept some connections as an event loop does, accept4 with
 * SOCK_NONBLOCK, and make them blocking again with fcntl): reads by recv MSG_PEEK then read, recv MSG_WAITALL, readv,
 * recvmsg, or an edge-triggered epoll set drained to EAGAIN; writes by
 * writev, sendmsg, or send MSG_DONTWAIT; a step "timeo" (a read under
 * SO_RCVTIMEO with nothing coming: EAGAIN); and at the end the poll
 * events that FIN or a reset raise, SO_ERROR after a reset and the poll
 * events then, the read after it, and a write after it.
 * Each side prints one line per step it saw: "cC SS who what", where what
 * is "ok N", "eof", or an errno name, never a time.  The program that
 * would deadlock on kernel TCP is never generated.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include "diff-stream-calls.h"
#include "diff-stream-gen.h"
#include "helpers.h"

/* ---- one side of a connection ---- */

static int side; /* 0 client, 1 server */
static __thread int conn_i;
static int threaded; /* -T */
static uint64_t seed_g;

static void say(int step, const char *what, long v)
{
	if (v >= 0)
		printf("c%d %02d %s %s %ld\n", conn_i, step, side ? "server" : "client", what, v);
	else
		printf("c%d %02d %s %s\n", conn_i, step, side ? "server" : "client", what);
	fflush(stdout);
}

static const char *ename(int e)
{
	switch (e) {
	case EINTR: return "EINTR";
	case ECONNRESET: return "ECONNRESET";
	case EPIPE: return "EPIPE";
	case EAGAIN: return "EAGAIN";
	case ENOTCONN: return "ENOTCONN";
	case ETIMEDOUT: return "ETIMEDOUT";
	default: return "EOTHER";
	}
}

/* stream positions per direction, so every byte is checked */
static __thread uint64_t pos_tx, pos_rx;
static uint64_t dir_seed(int from) { return seed_g * 131 + (uint64_t)conn_i * 2 + (uint64_t)from; }

static int do_write(int fd, uint32_t n, uint32_t chunk, int nb, int xw)
{
	static __thread uint8_t buf[1 << 16];
	uint32_t done = 0;
	set_nonblock(fd, nb);
	while (done < n) {
		uint32_t want = n - done < chunk ? n - done : chunk;
		ssize_t w;
		if (want > sizeof(buf))
			want = sizeof(buf);
		t_stream_fill(dir_seed(side), pos_tx, buf, want);
		w = write_x(fd, buf, want, xw);
		if (w < 0 && errno == EAGAIN && (nb || xw == XW_DONTWAIT) && wait_ready(fd, RD_POLL, POLLOUT) == 0)
			continue;
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		done += (uint32_t)w;
		pos_tx += (uint64_t)w;
	}
	set_nonblock(fd, 0);
	return (int)done;
}

static long do_read(int fd, uint32_t n, int mode, int xr)
{
	static __thread uint8_t buf[1 << 16];
	uint32_t done = 0;
	int ep = -1;
	long ret;
	set_nonblock(fd, mode != RD_BLOCK);
	if (xr == XR_EPOLLET) {
		/* edge-triggered: read until EAGAIN, and only then wait */
		struct epoll_event e = {.events = EPOLLIN | EPOLLET};
		ep = epoll_create1(0);
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
	}
	while (done < n) {
		uint32_t want = n - done < sizeof(buf) ? n - done : sizeof(buf);
		ssize_t r;
		if (mode != RD_BLOCK && ep < 0 && wait_ready(fd, mode, POLLIN) < 0) {
			ret = -ETIMEDOUT;
			goto out;
		}
		r = read_x(fd, buf, want, xr);
		if (r < 0 && errno == EAGAIN && ep >= 0) {
			struct epoll_event got;
			if (epoll_wait(ep, &got, 1, 10000) != 1) {
				ret = -ETIMEDOUT;
				goto out;
			}
			continue;
		}
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r < 0) {
			ret = -errno;
			goto out;
		}
		if (r == 0)
			break;
		if (t_stream_check(dir_seed(!side), pos_rx, buf, (size_t)r) >= 0) {
			ret = -EBADMSG;
			goto out;
		}
		done += (uint32_t)r;
		pos_rx += (uint64_t)r;
	}
	ret = done;
out:
	if (ep >= 0)
		close(ep);
	set_nonblock(fd, 0);
	return ret;
}

static void report_read(int step, long r, uint32_t want)
{
	if (r == -EBADMSG)
		say(step, "CORRUPT", -1);
	else if (r < 0)
		say(step, ename((int)-r), -1);
	else if ((uint32_t)r < want)
		say(step, "short-then-eof", r);
	else
		say(step, "ok", r);
}

/* jump: where the handler leaves the read to, on the thread that reads */
static __thread sigjmp_buf jump_to;
static __thread volatile sig_atomic_t jump_armed;

static void on_alarm(int sig)
{
	(void)sig;
	if (jump_armed) {
		jump_armed = 0;
		siglongjmp(jump_to, 1);
	}
}

/* threads: the signal goes to the thread that reads, every 100 ms until
 * its read is over */
struct alarm_to {
	pthread_t reader;
	atomic_int over;
};

static void *alarm_thread(void *arg)
{
	struct alarm_to *a = arg;
	while (usleep(100000), !atomic_load(&a->over))
		pthread_kill(a->reader, SIGALRM);
	return NULL;
}

/* The read of one byte with nothing coming, SIGALRM 100 ms into it (to
 * this thread): what it saw, "jumped" when the handler left it (JUMP).
 * The signal comes again every 100 ms until the read is over: one that a
 * slow machine delivered before the read began (the handler ran, nothing
 * to interrupt) would have left the read blocked for good, both sides
 * waiting, on kernel TCP as on rshare. */
static const char *alarmed_read(int fd, char *b, int jump)
{
	struct itimerval it = {.it_value = {0, 100000}, .it_interval = {0, 100000}}, off = {{0, 0}, {0, 0}};
	struct alarm_to a = {.reader = pthread_self()};
	pthread_t al;
	ssize_t r;
	if (!threaded)
		setitimer(ITIMER_REAL, &it, NULL);
	else if (pthread_create(&al, NULL, alarm_thread, &a) != 0)
		t_die("pthread_create: %s", strerror(errno));
	if (jump && sigsetjmp(jump_to, 1)) {
		r = -2;
	} else {
		jump_armed = jump;
		r = read(fd, b, 1);
		jump_armed = 0;
	}
	if (!threaded) {
		setitimer(ITIMER_REAL, &off, NULL);
	} else {
		atomic_store(&a.over, 1);
		pthread_join(al, NULL);
	}
	return r == -2 ? "jumped" : r < 0 ? ename(errno) : "data";
}

static void step_intr(int fd, int step, const struct step *st)
{
	char b = 1;
	if (side == st->from) {
		struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART */
		sigaction(SIGALRM, &sa, NULL);
		say(step, alarmed_read(fd, &b, st->kind == ST_JUMP), -1);
		b = 1;
		(void)!write(fd, &b, 1);
	} else {
		ssize_t r;
		while ((r = read(fd, &b, 1)) < 0 && errno == EINTR)
			;
		say(step, r == 1 ? "go" : r == 0 ? "eof" : ename(errno), -1);
	}
}

/* -X: a read under SO_RCVTIMEO with nothing coming, then one byte that
 * lets the other side go on */
static void step_timeo(int fd, int step, const struct step *st)
{
	char b = 1;
	ssize_t r;
	if (side == st->from) {
		struct timeval tv = {0, 100000}, none = {0, 0};
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		r = read(fd, &b, 1);
		say(step, r < 0 ? ename(errno) : "data", -1);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
		b = 1;
		(void)!write(fd, &b, 1);
	} else {
		while ((r = read(fd, &b, 1)) < 0 && errno == EINTR)
			;
		say(step, r == 1 ? "go" : r == 0 ? "eof" : ename(errno), -1);
	}
}

#define SHOW_RESET ((short)-2)
/* -X: what poll reports for ev once something happened (10 s at most),
 * of the bits in show; SHOW_RESET: all, or only POLLERR (kernel TCP shows
 * a reset's error before the HUP, IN and RDHUP of its shutdown) */
static void say_poll(int fd, int step, short ev, int ms, short show)
{
	struct pollfd p = {.fd = fd, .events = ev};
	char out[64] = "poll";
	/* once more at once: a waiter may wake between a reset's error and its shutdown */
	if (poll(&p, 1, ms) != 1 || poll(&p, 1, 0) != 1)
		strcat(out, " none");
	show = show == SHOW_RESET && (p.revents & POLLERR) ? POLLERR : show;
	poll_names(p.revents & show, out);
	say(step, out, -1);
}

/* -X: a write of one byte where none can go */
static void say_write(int fd, int step)
{
	char b = 1;
	ssize_t w = write(fd, &b, 1);
	say(step, w < 0 ? ename(errno) : "written", -1);
}

static void run_step(int fd, int step, const struct step *st)
{
	if (st->kind == ST_TIMEO) {
		step_timeo(fd, step, st);
		return;
	}
	if (st->kind == ST_INTR || st->kind == ST_JUMP) {
		step_intr(fd, step, st);
		return;
	}
	if (st->kind == ST_BOTH) {
		int w = do_write(fd, st->n, st->chunk, st->wnonblock, st->xw);
		if (w < 0)
			say(step, ename(-w), -1);
		report_read(step, do_read(fd, st->n, st->rmode, st->xr), st->n);
		return;
	}
	if (side == st->from) {
		int w = do_write(fd, st->n, st->chunk, st->wnonblock, st->xw);
		say(step, w < 0 ? ename(-w) : "sent", w < 0 ? -1 : w);
	} else {
		report_read(step, do_read(fd, st->n, st->rmode, st->xr), st->n);
	}
}

static void run_end(int fd, const struct conn *c)
{
	int me = side == c->end_from;
	char b = 1;
	/* a barrier first: each side has read all it was sent, so that what
	 * the end does next (a reset above all) finds nothing in flight */
	if (write(fd, &b, 1) != 1 || read(fd, &b, 1) != 1)
		say(89, "barrier-failed", -1);
	if (c->end == END_FIN) {
		if (me) {
			shutdown(fd, SHUT_WR);
			if (extended) {
				say_poll(fd, 85, POLLOUT, 0, POLLOUT); /* HUP follows the peer's FIN */
				say_write(fd, 86);
			}
			report_read(90, do_read(fd, c->end_n, RD_BLOCK, XR_READ), c->end_n);
			say(91, read(fd, &b, 1) == 0 ? "eof" : "not-eof", -1);
		} else {
			if (extended)
				say_poll(fd, 85, POLLIN | POLLRDHUP, 10000, -1);
			say(90, read(fd, &b, 1) == 0 ? "eof" : "not-eof", -1);
			do_write(fd, c->end_n, c->end_n, 0, XW_WRITE);
		}
	} else if (c->end == END_UNREAD) {
		if (me) {
			ssize_t r;
			do_write(fd, c->end_n, c->end_n, 0, XW_WRITE);
			if (extended)
				say_poll(fd, 85, POLLIN | POLLRDHUP, 10000, SHOW_RESET);
			r = read(fd, &b, 1);
			say(90, r < 0 ? ename(errno) : r == 0 ? "eof" : "data", -1);
			if (extended) {
				say_write(fd, 92);
				r = read(fd, &b, 1);
				say(93, r < 0 ? ename(errno) : r == 0 ? "eof" : "data", -1);
			}
		} else {
			wait_ready(fd, RD_POLL, POLLIN);
			say(90, "close-unread", -1);
		}
	} else {
		if (me) {
			ssize_t r;
			if (extended) {
				int err = 0;
				socklen_t el = sizeof(err);
				say_poll(fd, 85, POLLIN | POLLRDHUP, 10000, SHOW_RESET);
				getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
				say(86, err ? ename(err) : "so_error 0", -1);
				say_poll(fd, 87, POLLIN | POLLOUT | POLLRDHUP, 0, -1); /* the error went */
			}
			r = read(fd, &b, 1);
			say(90, r < 0 ? ename(errno) : r == 0 ? "eof" : "data", -1);
			if (extended)
				say_write(fd, 92);
		} else {
			struct linger lg = {1, 0};
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			say(90, "close-linger0", -1);
		}
	}
	close(fd);
}

static void run_conn(int fd, const struct conn *c)
{
	signal(SIGPIPE, SIG_IGN);
	for (int j = 0; j < c->nsteps; j++)
		run_step(fd, j, &c->st[j]);
	run_end(fd, c);
	if (!threaded)
		_exit(0);
}

/* -T: a connection in a thread of its own */
struct conn_arg {
	int fd, i;
	const struct conn *c;
	pthread_t th;
};

static void *conn_thread(void *arg)
{
	struct conn_arg *a = arg;
	conn_i = a->i;
	run_conn(a->fd, a->c);
	return NULL;
}

static void conn_start(struct conn_arg *a, int fd, int i, const struct conn *c)
{
	*a = (struct conn_arg){.fd = fd, .i = i, .c = c};
	if (pthread_create(&a->th, NULL, conn_thread, a) != 0)
		t_die("pthread_create: %s", strerror(errno));
}

/* ---- the two programs ---- */

static int server(const struct prog *p, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
	side = 1;
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 16) < 0)
		t_die("server: %s", strerror(errno));
	struct conn_arg th[MAX_CONNS];
	printf("ready\n");
	fflush(stdout);
	for (conn_i = 0; conn_i < p->nconns; conn_i++) {
		int nb = p->c[conn_i].nb_accept, fd = nb ? accept4(lfd, NULL, NULL, SOCK_NONBLOCK) : accept(lfd, NULL, NULL);
		if (fd < 0)
			t_die("accept: %s", strerror(errno));
		if (nb && ((fcntl(fd, F_GETFL) & O_NONBLOCK) == 0 || fcntl(fd, F_SETFL, 0) < 0 ||
			   (fcntl(fd, F_GETFL) & O_NONBLOCK)))
			t_die("accept4(SOCK_NONBLOCK), then fcntl back to blocking: not as asked");
		if (threaded) {
			conn_start(&th[conn_i], fd, conn_i, &p->c[conn_i]);
			continue;
		}
		if (fork() == 0) {
			close(lfd);
			run_conn(fd, &p->c[conn_i]);
		}
		close(fd);
	}
	for (int i = 0; threaded && i < p->nconns; i++)
		pthread_join(th[i].th, NULL);
	while (wait(NULL) > 0)
		;
	return 0;
}

static int open_conn(const struct sockaddr_in *a, int nb)
{
	int fd = socket(AF_INET, SOCK_STREAM | (nb ? SOCK_NONBLOCK : 0), 0), err = 0;
	socklen_t el = sizeof(err);
	if (connect(fd, (const struct sockaddr *)a, sizeof(*a)) == 0)
		return fd;
	if (!nb || errno != EINPROGRESS || wait_ready(fd, RD_POLL, POLLOUT) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err)
		t_die("connect: %s", strerror(err ? err : errno));
	set_nonblock(fd, 0);
	return fd;
}

static int client(const struct prog *p, const char *addr, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fds[MAX_CONNS], st, bad = 0;
	side = 0;
	if (inet_pton(AF_INET, addr, &a.sin_addr) != 1)
		t_die("bad address %s", addr);
	struct conn_arg th[MAX_CONNS];
	for (int i = 0; i < p->nconns; i++)
		fds[i] = open_conn(&a, p->c[i].nb_connect);
	if (threaded) {
		for (int i = 0; i < p->nconns; i++)
			conn_start(&th[i], fds[i], i, &p->c[i]);
		for (int i = 0; i < p->nconns; i++)
			pthread_join(th[i].th, NULL);
		return 0;
	}
	for (conn_i = 0; conn_i < p->nconns; conn_i++)
		if (fork() == 0) {
			for (int i = 0; i < p->nconns; i++)
				if (i != conn_i)
					close(fds[i]);
			run_conn(fds[conn_i], &p->c[conn_i]);
		}
	for (int i = 0; i < p->nconns; i++)
		close(fds[i]);
	while (wait(&st) > 0)
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	return bad;
}

int main(int argc, char **argv)
{
	struct prog p;
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (argc >= 2 && (!strcmp(argv[1], "-T") || !strcmp(argv[1], "-X"))) {
		if (argv[1][1] == 'T')
			threaded = 1;
		else
			extended = 1;
		argv++;
		argc--;
	}
	if (argc >= 3)
		seed_g = strtoull(argv[2], NULL, 0);
	gen(seed_g, &p);
	if (argc == 3 && !strcmp(argv[1], "-p")) {
		print_prog(&p);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "-s"))
		return server(&p, atoi(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "-c"))
		return client(&p, argv[3], atoi(argv[4]));
	fprintf(stderr, "usage: diff-stream [-T] [-X] -s SEED PORT | [-T] [-X] -c SEED ADDR PORT | [-X] -p SEED\n");
	return 2;
}
