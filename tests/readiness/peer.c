/*
 * readiness/peer.c - the peer of nonblocking-and-readiness: its data
 * connections and the control commands it serves about them (ACCEPT, DIAL,
 * SEND, SEND2, RECV, READ, SHUTWR, RESET, CLOSE).
 */
#include "readiness.h"

#define MAXC 256
static struct pconn {
	int fd;
	uint64_t tx, rx;
} pc[MAXC];
static int npc;

static struct pconn *pconn_of(int k)
{
	return k >= 0 && k < npc && pc[k].fd >= 0 ? &pc[k] : NULL;
}

static int pconn_add(int fd)
{
	if (npc == MAXC) {
		close(fd);
		return -1;
	}
	pc[npc] = (struct pconn){.fd = fd};
	return npc++;
}

static int peer_send(struct pconn *p, int k, uint64_t n)
{
	static uint8_t sbuf[BUFSZ];
	while (n) {
		size_t m = n < BUFSZ ? (size_t)n : BUFSZ;
		t_stream_fill(seed_p2c(k), p->tx, sbuf, m);
		if (t_write_full(p->fd, sbuf, m) < 0)
			return -1;
		p->tx += m;
		n -= m;
	}
	return 0;
}

static uint8_t pbuf[BUFSZ]; /* what RECV, READ and RESET read into */

static void peer_dial(int cfd, long port)
{
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	int fd = -1;
	if (getpeername(cfd, (struct sockaddr *)&a, &al) < 0) {
		line_write(cfd, "err getpeername %s", ename(errno));
		return;
	}
	a.sin_port = htons((uint16_t)port);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		line_write(cfd, "err connect %s", ename(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	line_write(cfd, "ok %d", pconn_add(fd));
}

/* RECV K N: read exactly N bytes of K, each checked */
static void peer_recv(int cfd, struct pconn *p, int k, uint64_t want)
{
	uint64_t got = 0;
	const char *err = NULL;
	char eb[160];
	while (got < want) {
		size_t m = want - got < BUFSZ ? (size_t)(want - got) : BUFSZ;
		ssize_t r = read(p->fd, pbuf, m);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			snprintf(eb, sizeof(eb), "%s after %llu of %llu bytes",
				 r == 0 ? "eof" : ename(errno), (unsigned long long)got,
				 (unsigned long long)want);
			err = eb;
			break;
		}
		long long bad = t_stream_check(seed_c2p(k), p->rx, pbuf, (size_t)r);
		if (bad >= 0) {
			snprintf(eb, sizeof(eb), "byte %llu differs from what was sent",
				 (unsigned long long)(p->rx + (uint64_t)bad));
			err = eb;
			break;
		}
		p->rx += (uint64_t)r;
		got += (uint64_t)r;
	}
	if (err)
		line_write(cfd, "err %s", err);
	else
		line_write(cfd, "ok");
}

static void peer_read(int cfd, struct pconn *p, int k)
{
	ssize_t r;
	do
		r = read(p->fd, pbuf, BUFSZ);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		line_write(cfd, "err %s", ename(errno));
	else if (r == 0)
		line_write(cfd, "eof");
	else if (t_stream_check(seed_c2p(k), p->rx, pbuf, (size_t)r) >= 0)
		line_write(cfd, "err %zd bytes differ from what was sent", r);
	else {
		p->rx += (uint64_t)r;
		line_write(cfd, "data %zd", r);
	}
}

static void peer_reset(int cfd, struct pconn *p)
{
	ssize_t r;
	do
		r = recv(p->fd, pbuf, 1, MSG_PEEK);
	while (r < 0 && errno == EINTR);
	close(p->fd);
	p->fd = -1;
	if (r == 1)
		line_write(cfd, "ok");
	else
		line_write(cfd, "err no unread data to reset with (peek %s)", res(r, errno));
}

/* the commands about a connection K the peer holds */
static void peer_conn_cmd(int cfd, const char *line, const char *cmd, struct pconn *p, int k, long a2,
			  long a3)
{
	if (!strcmp(cmd, "SEND") && a2 >= 0) {
		if (peer_send(p, k, (uint64_t)a2) < 0)
			line_write(cfd, "err send %s", ename(errno));
		else
			line_write(cfd, "ok");
	} else if (!strcmp(cmd, "SEND2") && a2 >= 0 && a3 >= 0) {
		line_write(cfd, "ok");
		if (peer_send(p, k, (uint64_t)a2) == 0) {
			usleep((useconds_t)a3 * 1000);
			peer_send(p, k, (uint64_t)a2);
		}
	} else if (!strcmp(cmd, "RECV") && a2 >= 0) {
		peer_recv(cfd, p, k, (uint64_t)a2);
	} else if (!strcmp(cmd, "READ")) {
		peer_read(cfd, p, k);
	} else if (!strcmp(cmd, "SHUTWR")) {
		if (shutdown(p->fd, SHUT_WR) < 0)
			line_write(cfd, "err shutdown %s", ename(errno));
		else
			line_write(cfd, "ok");
	} else if (!strcmp(cmd, "RESET")) {
		peer_reset(cfd, p);
	} else if (!strcmp(cmd, "CLOSE")) {
		close(p->fd);
		p->fd = -1;
		line_write(cfd, "ok");
	} else {
		line_write(cfd, "err bad command: %s", line);
	}
}

static void peer_serve(int cfd, int dlfd)
{
	char line[256];
	while (line_read(cfd, line, sizeof(line)) >= 0) {
		char cmd[16] = "";
		long a1 = -1, a2 = -1, a3 = -1;
		sscanf(line, "%15s %ld %ld %ld", cmd, &a1, &a2, &a3);
		struct pconn *p = pconn_of((int)a1);
		int k = (int)a1;
		if (!strcmp(cmd, "ACCEPT")) {
			int fd = accept(dlfd, NULL, NULL);
			if (fd < 0)
				line_write(cfd, "err accept %s", ename(errno));
			else
				line_write(cfd, "ok %d", pconn_add(fd));
		} else if (!strcmp(cmd, "DIAL")) {
			peer_dial(cfd, a1);
		} else if (!p) {
			line_write(cfd, "err bad command or connection: %s", line);
		} else {
			peer_conn_cmd(cfd, line, cmd, p, k, a2, a3);
		}
	}
}

int peer_main(int port)
{
	signal(SIGPIPE, SIG_IGN);
	int clfd = tcp_listen(port, 0), dlfd = tcp_listen(port + 1, 0);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int cfd = accept(clfd, NULL, NULL);
		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			t_die("nonblocking-and-readiness peer: accept: %s", strerror(errno));
		}
		peer_serve(cfd, dlfd);
		close(cfd);
		for (int i = 0; i < npc; i++)
			if (pc[i].fd >= 0)
				close(pc[i].fd);
		npc = 0;
	}
}
