/*
 * splice.c - splice(2) between a pipe and an rshare connection.
 *
 * The kernel's splice needs a kernel socket; an rshare connection's bytes
 * are in its arena rings, so splice is done here with the data calls, as
 * the kernel would: one end a pipe (else EINVAL), each end open the right
 * way (EBADF), no offset (ESPIPE in a pipe, EINVAL in a connection), 0 at the connection's end or when a pipe with no writer is
 * empty.  As the kernel's, a wait on the pipe is nonblocking (EAGAIN) when
 * SPLICE_F_NONBLOCK is given or either file is O_NONBLOCK, a wait on the
 * connection only when it is O_NONBLOCK.  No byte is taken from one end
 * that the other does not take whole:
 *   - connection to pipe: wait for room in the pipe (a free buffer), then
 *     peek at most what fits into it (its free bytes, less one page for a
 *     buffer that another writer left partly used), write that to the
 *     pipe, and take from the connection what the pipe took;
 *   - pipe to connection: wait for bytes in the pipe, read them and send
 *     them whole (SPLICE_F_MORE as MSG_MORE; a signal does not stop it
 *     halfway); to an O_NONBLOCK connection at most what its send ring has
 *     room for (EAGAIN when it has none).
 * A peeked byte that another thread reads from the same connection before
 * it is taken reaches both (the kernel's splice holds the socket's lock).
 * A call moves at most SPLICE_PIECE bytes: splice returns what it moved,
 * as the kernel's does once a pipe is full, and callers loop.
 */
#include "preload.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#define SPLICE_PIECE (1 << 16)
#define SPLICE_PAGE 4096

static int is_pipe(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

/* Until fd has EV (a pipe end): 1, 0 for nonblocking and not yet, -1 */
static int pipe_wait(int fd, short ev, int nb, short *got)
{
	struct pollfd p = {.fd = fd, .events = ev};
	uint32_t mark[2];
	int r;
	do {
		vs_sig_mark(mark);
		r = R(poll)(&p, 1, nb ? 0 : -1);
	} while (r < 0 && errno == EINTR && vs_sig_restarts(mark));
	*got = p.revents;
	return r;
}

static ssize_t from_conn(int in, struct pfd *p, int out, size_t len, int nb, char *piece)
{
	int cap = fcntl(out, F_GETPIPE_SZ), used = 0;
	short ev;
	ssize_t n, w, room;
	int r = pipe_wait(out, POLLOUT, nb, &ev);
	if (r <= 0) {
		if (r == 0)
			errno = EAGAIN;
		return -1;
	}
	if (ev & POLLERR) { /* no reader: as the kernel, SIGPIPE and EPIPE */
		raise(SIGPIPE);
		errno = EPIPE;
		return -1;
	}
	if (ioctl(out, FIONREAD, &used) < 0)
		used = 0;
	room = (ssize_t)cap - used - (used ? SPLICE_PAGE : 0);
	if (room < SPLICE_PAGE)
		room = SPLICE_PAGE; /* a free buffer takes a page without waiting */
	n = (ssize_t)len < room ? (ssize_t)len : room;
	n = recv(in, piece, (size_t)n, MSG_PEEK); /* waits unless in is O_NONBLOCK */
	if (n <= 0)
		return n;
	w = R(write)(out, piece, (size_t)n);
	if (w > 0) /* the bytes the pipe took, taken */
		vs_recv(p->slot, &(struct iovec){piece, (size_t)w}, 1, MSG_DONTWAIT);
	return w;
}

static ssize_t to_conn(int in, int out, struct pfd *p, size_t len, unsigned int flags, int nb, int out_nb,
		       char *piece)
{
	int avail = 0, r;
	ssize_t n, room, sent;
	short ev;
	r = pipe_wait(in, POLLIN, nb, &ev);
	if (r <= 0) {
		if (r == 0)
			errno = EAGAIN;
		return -1;
	}
	if (ioctl(in, FIONREAD, &avail) < 0 || avail <= 0)
		return 0; /* no bytes, and no writer (POLLHUP) */
	room = out_nb ? vs_nroom(p->slot) : SPLICE_PIECE;
	if (room <= 0) {
		errno = EAGAIN;
		return -1;
	}
	n = (ssize_t)len < avail ? (ssize_t)len : avail;
	n = n < room ? n : room;
	n = n < SPLICE_PIECE ? n : SPLICE_PIECE;
	n = R(read)(in, piece, (size_t)n);
	if (n <= 0)
		return n;
	for (sent = 0; sent < n;) {
		/* SIGPIPE as the kernel's splice raises it */
		ssize_t s = send(out, piece + sent, (size_t)(n - sent), flags & SPLICE_F_MORE ? MSG_MORE : 0);
		if (s < 0 && errno == EINTR)
			continue; /* the bytes left the pipe: they go */
		if (s < 0)
			return sent ? sent : -1;
		sent += s;
	}
	return sent;
}

ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len, unsigned int flags)
{
	struct pfd *pi = rs_of(in), *po = rs_of(out);
	int nb, e, fi, fo;
	char *piece;
	ssize_t r;
	if (!pi && !po)
		return R(splice)(in, off_in, out, off_out, len, flags);
	if ((pi && po) || !is_pipe(pi ? out : in)) {
		errno = EINVAL; /* neither end a pipe */
		return -1;
	}
	fi = fcntl(in, F_GETFL); /* status flags and access modes */
	fo = fcntl(out, F_GETFL);
	if (fi < 0 || fo < 0 || (fi & O_ACCMODE) == O_WRONLY || (fo & O_ACCMODE) == O_RDONLY) {
		errno = EBADF; /* a pipe's end the wrong way round */
		return -1;
	}
	if (pi ? off_out : off_in) {
		errno = ESPIPE; /* an offset in a pipe */
		return -1;
	}
	if (pi ? off_in : off_out) {
		errno = EINVAL; /* an offset in a connection */
		return -1;
	}
	if (!len)
		return 0;
	if (po && po->kind != FD_RS)
		return rs_send_listener(0);
	if (pi && pi->kind != FD_RS) {
		errno = ENOTCONN;
		return -1;
	}
	nb = (flags & SPLICE_F_NONBLOCK) || ((fi | fo) & O_NONBLOCK); /* for the pipe */
	if (!(piece = malloc(SPLICE_PIECE))) {
		errno = ENOMEM;
		return -1;
	}
	if (pi)
		r = from_conn(in, pi, out, len < SPLICE_PIECE ? len : SPLICE_PIECE, nb, piece);
	else
		r = to_conn(in, out, po, len, flags, nb, (fo & O_NONBLOCK) != 0, piece);
	e = errno;
	free(piece);
	errno = e;
	return r;
}
