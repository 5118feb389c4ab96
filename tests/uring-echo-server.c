/*
 * uring-echo-server PORT - an echo server that does all of its socket I/O
 * through io_uring (liburing): accept, recv and send are ring operations,
 * which no library call sees (tests/io-uring-programs-run-on-kernel-tcp.bats).
 *
 * Prints "ready" once it listens.  Each connection: recv into its buffer,
 * send all of it back (again while the send is short), then recv again;
 * at end of file it closes the connection.
 */
#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "helpers.h"

#define MAXC 256
#define BUF (64 * 1024)

enum { OP_ACCEPT, OP_RECV, OP_SEND };

struct conn {
	int fd;
	size_t len, off;
	char buf[BUF];
};

static struct conn *conns[MAXC];

static void *tag(int op, int i)
{
	return (void *)(uintptr_t)((uint64_t)op << 32 | (uint32_t)i);
}

static struct io_uring_sqe *sqe(struct io_uring *r)
{
	struct io_uring_sqe *e = io_uring_get_sqe(r);
	if (!e) {
		io_uring_submit(r);
		e = io_uring_get_sqe(r);
	}
	if (!e)
		t_die("no submission entry");
	return e;
}

static void arm_recv(struct io_uring *r, int i)
{
	struct io_uring_sqe *e = sqe(r);
	io_uring_prep_recv(e, conns[i]->fd, conns[i]->buf, BUF, 0);
	io_uring_sqe_set_data(e, tag(OP_RECV, i));
}

static void arm_send(struct io_uring *r, int i)
{
	struct conn *c = conns[i];
	struct io_uring_sqe *e = sqe(r);
	io_uring_prep_send(e, c->fd, c->buf + c->off, c->len - c->off, MSG_NOSIGNAL);
	io_uring_sqe_set_data(e, tag(OP_SEND, i));
}

static void arm_accept(struct io_uring *r, int l)
{
	struct io_uring_sqe *e = sqe(r);
	io_uring_prep_accept(e, l, NULL, NULL, 0);
	io_uring_sqe_set_data(e, tag(OP_ACCEPT, 0));
}

static void drop(int i)
{
	close(conns[i]->fd);
	free(conns[i]);
	conns[i] = NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	struct io_uring r;
	int one = 1, l;
	if (argc != 2)
		t_die("usage: uring-echo-server PORT");
	a.sin_port = htons((uint16_t)atoi(argv[1]));
	l = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 128) < 0)
		t_die("listen: %s", strerror(errno));
	if (io_uring_queue_init(256, &r, 0) < 0)
		t_die("io_uring_queue_init");
	arm_accept(&r, l);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		struct io_uring_cqe *cqe;
		uint64_t d;
		int op, i, res;
		io_uring_submit(&r);
		if (io_uring_wait_cqe(&r, &cqe) < 0)
			continue;
		d = (uint64_t)(uintptr_t)io_uring_cqe_get_data(cqe);
		op = (int)(d >> 32);
		i = (int)(uint32_t)d;
		res = cqe->res;
		io_uring_cqe_seen(&r, cqe);
		if (op == OP_ACCEPT) {
			arm_accept(&r, l);
			for (i = 0; i < MAXC && conns[i]; i++)
				;
			if (res < 0 || i == MAXC) {
				if (res >= 0)
					close(res);
				continue;
			}
			conns[i] = calloc(1, sizeof(struct conn));
			conns[i]->fd = res;
			arm_recv(&r, i);
		} else if (op == OP_RECV) {
			if (res <= 0) {
				drop(i);
				continue;
			}
			conns[i]->len = (size_t)res;
			conns[i]->off = 0;
			arm_send(&r, i);
		} else {
			if (res < 0) {
				drop(i);
				continue;
			}
			conns[i]->off += (size_t)res;
			if (conns[i]->off < conns[i]->len)
				arm_send(&r, i);
			else
				arm_recv(&r, i);
		}
	}
}
