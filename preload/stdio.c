/*
 * stdio.c - stdio streams on rshare connections.
 *
 * glibc's stdio reads and writes a stream's descriptor through its own
 * internal read and write, which no preloaded library can stand in for: a
 * stream on an rshare connection would reach the kernel socket behind it,
 * which never connected (EPIPE, ENOTCONN).  So such a stream is made of
 * the library's own calls instead (fopencookie):
 *   - fdopen() of an rshare connection returns one, whose fileno() is the
 *     descriptor and whose fclose() closes it;
 *   - stdin, stdout and stderr become one while descriptor 0, 1 or 2 names
 *     an rshare connection (a program that inetd started with its
 *     connection as its standard input and output; a shell's `echo hi >&3`
 *     to /dev/tcp), and are put back once it names something else
 *     (std_follow, from fdtab.c whenever those entries change).  Bytes
 *     that the stream being put aside had buffered move to the other one,
 *     and go where the descriptor points when it is flushed, as they would
 *     with one stream.
 * A program that kept its own copy of the stdout pointer from before the
 * change still writes through the kernel's descriptor.
 */
#include "preload.h"

#include <stdio.h>

struct sd_cookie {
	int fd;
	int std; /* a standard stream's: its close leaves the descriptor open */
};

static ssize_t sd_read(void *c, char *buf, size_t n)
{
	return read(((struct sd_cookie *)c)->fd, buf, n);
}

/* as glibc's own: partial writes go on, an error ends it */
static ssize_t sd_write(void *c, const char *buf, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = write(((struct sd_cookie *)c)->fd, buf + done, n - done);
		if (r <= 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

static int sd_close(void *c)
{
	struct sd_cookie *k = c;
	int r = k->std ? 0 : close(k->fd);
	free(k);
	return r;
}

static int sd_streams; /* made: flushed before the library's end */

static FILE *sd_open(int fd, const char *mode, int std)
{
	static const cookie_io_functions_t io = {sd_read, sd_write, NULL, sd_close};
	/* fopencookie reads only "r", "w", "a" and a '+' right after them */
	char m[3] = {mode[0], strchr(mode, '+') ? '+' : 0, 0};
	struct sd_cookie *k = malloc(sizeof(*k));
	FILE *f;
	if (!k)
		return NULL;
	k->fd = fd;
	k->std = std;
	f = fopencookie(k, m, io);
	if (!f) {
		free(k);
		return NULL;
	}
	f->_fileno = fd; /* fileno() answers the descriptor, as fdopen's stream */
	__atomic_fetch_add(&sd_streams, 1, __ATOMIC_RELAXED);
	return f;
}

FILE *fdopen(int fd, const char *mode)
{
	struct pfd *p = rs_peek(fd);
	if (!p || p->kind != FD_RS || !mode || !strchr("rwa", mode[0]))
		return R(fdopen)(fd, mode);
	return sd_open(fd, mode, 0);
}

static FILE *std_orig[3], *std_ours[3];

static FILE **std_var(int fd)
{
	return fd == 0 ? &stdin : fd == 1 ? &stdout : &stderr;
}

/* the output `from` buffered goes to `to`, flushed with it */
static void std_move(FILE *from, FILE *to)
{
	size_t n;
	flockfile(from);
	n = (size_t)(from->_IO_write_ptr - from->_IO_write_base);
	if (from->_IO_write_base && n && n < (1u << 30)) {
		fwrite(from->_IO_write_base, 1, n, to);
		from->_IO_write_ptr = from->_IO_write_base;
	}
	funlockfile(from);
}

void std_follow(int fd)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct pfd *p = pfd_get(fd);
	int rs = p && __atomic_load_n(&p->kind, __ATOMIC_ACQUIRE) == FD_RS;
	FILE **var = std_var(fd), *f;
	if (rs == !!std_ours[fd])
		return;
	pthread_mutex_lock(&lock);
	if (rs && !std_ours[fd] && (f = sd_open(fd, fd ? "w" : "r", 1))) {
		if (fd == 2)
			setvbuf(f, NULL, _IONBF, 0);
		std_orig[fd] = *var;
		if (fd)
			std_move(std_orig[fd], f);
		std_ours[fd] = f;
		*var = f;
	} else if (!rs && std_ours[fd]) {
		f = std_ours[fd];
		*var = std_orig[fd];
		if (fd)
			std_move(f, std_orig[fd]);
		std_ours[fd] = NULL;
		fclose(f);
	}
	pthread_mutex_unlock(&lock);
}

void std_flush(void)
{
	if (__atomic_load_n(&sd_streams, __ATOMIC_RELAXED))
		fflush(NULL);
}
