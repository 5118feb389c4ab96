/*
 * keep.c - keepers: the readiness descriptors the hub cannot hold itself.
 *
 * Each polled socket has a readiness socketpair (ready.c), two
 * descriptors in the hub, and a node's polled connections can be many
 * more than the hub's descriptor limit allows.  So the hub holds at most
 * a budget of them (three quarters of its limit), the most recently used,
 * on a list in the order of their last use; the others live in keepers:
 * processes the hub forks when it first needs one, which do nothing but
 * hold descriptors, each up to its own limit.
 *
 * A pair the hub lets go of is sent to a keeper (SCM_RIGHTS over a unix
 * stream socket, in records of one size, with its place: the keeper keeps
 * P and H at two descriptor numbers of its own that the place names), and
 * the hub closes its copies at once (the channel holds them in flight);
 * the keeper answers once it holds them.  When the hub needs one of them
 * again it takes a copy with pidfd_getfd(2): one system call, no round
 * trip (only a pair not yet answered waits for its answer), and the
 * keeper's copy stays, so that letting go again is a close.  Past the
 * budget the hub sends a few at a time and skips a keeper whose channel is
 * full; near its limit (half its reserve past the budget) it waits for the
 * keepers instead, since an end it could not take back would be a lost
 * wake-up (a reflect that cannot have its end rings itself again).  An
 * end's last close is the keeper's (KEEP_CLOSE): a reset closes H for
 * good, and H's last close with unread data is what gives P its
 * ECONNRESET.  A close goes out in order with
 * the puts, and a place is free again only once its close went out.
 *
 * A keeper is forked, not executed: the child closes every descriptor but
 * its channel and stderr, and unmaps the pools' and pair segments' shared
 * memory, so that it pins none of their pages.  It ends with the hub (end
 * of its channel, or PR_SET_PDEATHSIG).  Where pidfd_getfd is missing or
 * not allowed, nothing goes to keepers: the hub holds what it can.
 */
#include "hub.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"

#define KEEP_BASE 16    /* a keeper's places start at this descriptor */
#define KEEP_TRIM_MAX 64 /* sockets looked at by one trim */
#define KEEP_WAIT_MS 2000 /* the longest the hub waits for room in a keeper's channel */

enum { KEEP_PUT = 1, KEEP_CLOSE, KEEP_ACK };

struct keep_msg {
	uint32_t op, place, ends; /* ends: bit 0 P, bit 1 H */
	uint32_t seq;             /* a put's, in its answer */
};

static int sys_pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int sys_pidfd_getfd(int pidfd, int fd)
{
	return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
}

/* This process's descriptor limit (a keeper's is the hub's), at most 2^20 */
static uint64_t nofile(void)
{
	struct rlimit rl;
	uint64_t lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
	return lim > 1u << 20 ? 1u << 20 : lim;
}

void keep_init(struct hub *h)
{
	uint64_t lim = nofile();
	uint64_t reserve = lim / 4 > 64 ? lim / 4 : 64;
	h->keep_budget = lim > reserve + 16 ? (uint32_t)(lim - reserve) : 16;
	/* past it, the hub waits for a keeper rather than run out */
	h->keep_hard = h->keep_budget + (uint32_t)(reserve / 2);
}

/* the hub's own readiness ends and keeper descriptors, against a limit */
static int keep_over(const struct hub *h, uint32_t limit)
{
	return h->keep_local + 2 * h->nkeepers > limit;
}

/* ---- the list of sockets whose ends the hub holds, oldest use first ---- */

static void lru_unlink(struct hub *h, struct hsock *s)
{
	if (!s->on_lru)
		return;
	if (s->lru_prev)
		h->socks[s->lru_prev]->lru_next = s->lru_next;
	else
		h->lru_head = s->lru_next;
	if (s->lru_next)
		h->socks[s->lru_next]->lru_prev = s->lru_prev;
	else
		h->lru_tail = s->lru_prev;
	s->lru_prev = s->lru_next = 0;
	s->on_lru = 0;
}

static void lru_append(struct hub *h, struct hsock *s)
{
	lru_unlink(h, s);
	s->lru_prev = h->lru_tail;
	s->lru_next = 0;
	if (h->lru_tail)
		h->socks[h->lru_tail]->lru_next = s->sid;
	else
		h->lru_head = s->sid;
	h->lru_tail = s->sid;
	s->on_lru = 1;
}

/* The hub's copies of s's ends go (the keeper holds them). */
static void let_go(struct hub *h, struct hsock *s)
{
	if (s->poll_p >= 0) {
		close(s->poll_p);
		s->poll_p = -1;
		h->keep_local--;
	}
	if (s->poll_h >= 0) {
		close(s->poll_h);
		s->poll_h = -1;
		h->keep_local--;
	}
	lru_unlink(h, s);
}

/* ---- keepers ---- */

/* In the child: drop the hub's descriptors and shared memory, keep. */
static __attribute__((noreturn)) void keeper_run(int ch, pid_t hub)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t none;
	char line[512];
	FILE *f;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int sig = 1; sig < NSIG; sig++)
		sigaction(sig, &dfl, NULL);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != hub)
		_exit(0);
	prctl(PR_SET_NAME, "rshared-keeper");
	if (ch != 3) {
		dup2(ch, 3);
		close(ch);
	}
	syscall(SYS_close_range, 4, ~0u, 0);
	/* the arenas and pair segments: memfd mappings */
	f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (strstr(line, "/memfd:") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			munmap((void *)lo, hi - lo);
	}
	if (f)
		fclose(f);
	{
		struct keep_msg up = {.op = KEEP_ACK, .place = ~0u};
		if (send(3, &up, sizeof(up), MSG_NOSIGNAL) < 0)
			_exit(0);
	}
	for (;;) {
		struct keep_msg m;
		union {
			char buf[CMSG_SPACE(2 * sizeof(int))];
			struct cmsghdr align;
		} c;
		struct iovec iov = {&m, sizeof(m)};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf,
				    .msg_controllen = sizeof(c.buf)};
		int fds[2] = {-1, -1}, n = 0;
		ssize_t r = recvmsg(3, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);
		if (r == 0 || (r < 0 && errno != EINTR))
			_exit(0);
		if (r != sizeof(m))
			continue;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
				n = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
				memcpy(fds, CMSG_DATA(cm), (size_t)(n > 2 ? 2 : n) * sizeof(int));
			}
		for (int e = 0, i = 0; e < 2; e++) {
			int at = KEEP_BASE + 2 * (int)m.place + e;
			if (!(m.ends & (1u << e)))
				continue;
			if (m.op == KEEP_PUT && i < n) {
				dup2(fds[i], at);
				close(fds[i++]);
			} else if (m.op == KEEP_CLOSE) {
				close(at);
			}
		}
		if (m.op == KEEP_PUT) {
			struct keep_msg a = {.op = KEEP_ACK, .place = m.place, .seq = m.seq};
			while (send(3, &a, sizeof(a), MSG_NOSIGNAL) < 0 && errno == EINTR)
				;
		}
	}
}

static void keeper_event(struct hub *h, struct hub_ev *ev, uint32_t events);

static void keeper_lost(struct hub *h, struct keeper *k)
{
	log_error("keeper %d is gone: the readiness descriptors it held are lost", (int)k->pid);
	hub_unwatch(h, k->ch);
	close(k->ch);
	close(k->pidfd);
	waitpid(k->pid, NULL, WNOHANG);
	for (uint32_t i = 0; i < k->hi; i++) {
		struct hsock *s = k->sid[i] ? h->socks[k->sid[i]] : NULL;
		if (!s || s->poll_k != k->idx + 1 || s->poll_place != i)
			continue;
		/* what the hub holds itself lives on; the rest is gone */
		s->poll_ends = (uint8_t)((s->poll_p >= 0 ? 1 : 0) | (s->poll_h >= 0 ? 2 : 0));
		s->poll_k = 0;
		s->poll_sent = s->poll_kept = 0;
		h->keep_kept--;
		if (s->poll_ends)
			lru_append(h, s);
	}
	k->dead = 1;
}

/* The child said it is set up; can the hub take its descriptors?  0, or
 * -1 with errno (then no keeper will do: pidfd_getfd missing or denied). */
static int keeper_up(int ch, pid_t pid, int *pidfd)
{
	struct pollfd pf = {.fd = ch, .events = POLLIN};
	struct keep_msg m;
	int t;
	if (poll(&pf, 1, 2000) != 1 || recv(ch, &m, sizeof(m), MSG_DONTWAIT) != sizeof(m) ||
	    m.op != KEEP_ACK || m.place != ~0u) {
		errno = ETIMEDOUT;
		return -1;
	}
	if ((*pidfd = sys_pidfd_open(pid)) < 0)
		return -1;
	if ((t = sys_pidfd_getfd(*pidfd, 3)) < 0) {
		int e = errno;
		close(*pidfd);
		*pidfd = -1;
		errno = e;
		return -1;
	}
	close(t);
	return 0;
}

static struct keeper *keeper_new(struct hub *h)
{
	uint64_t lim = nofile();
	struct keeper *k;
	int sv[2];
	pid_t pid, me = getpid();
	if (h->nkeepers == HUB_KEEPERS_MAX || h->keep_off)
		return NULL;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return NULL;
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		keeper_run(sv[1], me);
	}
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return NULL;
	}
	if (!(k = calloc(1, sizeof(*k))))
		goto fail;
	k->pidfd = -1;
	if (keeper_up(sv[0], pid, &k->pidfd) < 0) {
		log_warn("readiness descriptors stay in the hub: no keeper (%s)", strerror(errno));
		h->keep_off = 1;
		goto fail;
	}
	k->pid = pid;
	k->ch = sv[0];
	k->idx = h->nkeepers;
	k->ev.fn = keeper_event;
	k->cap = lim > KEEP_BASE + 8 ? (uint32_t)(lim - KEEP_BASE - 8) / 2 : 0;
	k->sid = calloc(k->cap ? k->cap : 1, sizeof(*k->sid));
	k->free = calloc(k->cap ? k->cap : 1, sizeof(*k->free));
	if (!k->cap || !k->sid || !k->free || hub_watch(h, k->ch, EPOLLIN, &k->ev) < 0)
		goto fail;
	h->keepers[h->nkeepers++] = k;
	log_info("keeper %d: holds up to %u readiness descriptor pairs", (int)pid, k->cap);
	return k;
fail:
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(sv[0]);
	if (k) {
		if (k->pidfd >= 0)
			close(k->pidfd);
		free(k->sid);
		free(k->free);
		free(k);
	}
	return NULL;
}

/* A keeper with a free place (a new one when all are full), its place. */
static struct keeper *keeper_place(struct hub *h, uint32_t *place)
{
	struct keeper *k = NULL;
	for (uint32_t i = 0; i < h->nkeepers && !k; i++) {
		struct keeper *c = h->keepers[i];
		if (!c->dead && (c->nfree || c->hi < c->cap))
			k = c;
	}
	if (!k && !(k = keeper_new(h)))
		return NULL;
	*place = k->nfree ? k->free[--k->nfree] : k->hi++;
	return k;
}

/* A close of both ends went out: the place may take another pair. */
static void place_free(struct keeper *k, const struct keep_msg *m)
{
	if (m->ends == 3) {
		k->sid[m->place] = 0;
		k->free[k->nfree++] = m->place;
	}
}

/* Send a close now, or queue it; its place is free once it went. */
static void keeper_close(struct hub *h, struct keeper *k, uint32_t place, uint32_t ends)
{
	struct keep_msg m = {.op = KEEP_CLOSE, .place = place, .ends = ends};
	if (k->dead)
		return;
	if (!k->nq && send(k->ch, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) == sizeof(m)) {
		place_free(k, &m);
		return;
	}
	if (k->nq == k->qcap) {
		uint32_t c = k->qcap ? k->qcap * 2 : 64;
		struct keep_msg *q = realloc(k->q, c * sizeof(*q));
		if (!q)
			return; /* the place stays taken: a leak of two descriptors in the keeper */
		k->q = q;
		k->qcap = c;
	}
	k->q[k->nq++] = m;
	hub_rewatch(h, k->ch, EPOLLIN | EPOLLOUT, &k->ev);
}

static void keeper_flush(struct hub *h, struct keeper *k)
{
	uint32_t i = 0;
	while (i < k->nq && send(k->ch, &k->q[i], sizeof(k->q[i]), MSG_NOSIGNAL | MSG_DONTWAIT) == sizeof(k->q[i]))
		place_free(k, &k->q[i++]);
	memmove(k->q, k->q + i, (k->nq - i) * sizeof(*k->q));
	k->nq -= i;
	if (!k->nq)
		hub_rewatch(h, k->ch, EPOLLIN, &k->ev);
}

/* Take the keeper's answers: the puts it holds.  -1 when it is gone. */
static int keeper_acks(struct hub *h, struct keeper *k)
{
	struct keep_msg m;
	ssize_t r;
	while ((r = recv(k->ch, &m, sizeof(m), MSG_DONTWAIT)) == sizeof(m)) {
		struct hsock *s;
		if (m.op != KEEP_ACK || m.place >= k->hi || !k->sid[m.place])
			continue;
		s = h->socks[k->sid[m.place]];
		if (!s || s->poll_k != k->idx + 1 || s->poll_place != m.place || !s->poll_sent ||
		    s->poll_seq != m.seq)
			continue;
		s->poll_sent = 0;
		s->poll_kept = 1;
	}
	return r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR) ? -1 : 0;
}

static void keeper_event(struct hub *h, struct hub_ev *ev, uint32_t events)
{
	struct keeper *k = (struct keeper *)((char *)ev - offsetof(struct keeper, ev));
	if (events & EPOLLOUT)
		keeper_flush(h, k);
	if (keeper_acks(h, k) < 0 || (events & (EPOLLHUP | EPOLLERR)))
		keeper_lost(h, k);
}

/* s was sent a moment ago and is needed again: wait (at most a second)
 * until its keeper holds it. */
static void keeper_wait(struct hub *h, struct keeper *k, struct hsock *s)
{
	uint64_t end = hub_now_ms() + 1000;
	while (s->poll_sent && !k->dead) {
		struct pollfd pf = {.fd = k->ch, .events = POLLIN};
		uint64_t now = hub_now_ms();
		if (now >= end || poll(&pf, 1, (int)(end - now)) < 0 || keeper_acks(h, k) < 0) {
			log_warn("keeper %d does not answer", (int)k->pid);
			return;
		}
	}
}

/* Room in k's channel, waited for (its answers taken meanwhile, or it
 * would wait on the hub in turn), at most KEEP_WAIT_MS: 0, or -1. */
static int keeper_room(struct hub *h, struct keeper *k)
{
	uint64_t end = hub_now_ms() + KEEP_WAIT_MS;
	for (;;) {
		struct pollfd pf = {.fd = k->ch, .events = POLLIN | POLLOUT};
		uint64_t now = hub_now_ms();
		if (k->nq)
			keeper_flush(h, k);
		if (k->dead || now >= end || poll(&pf, 1, (int)(end - now)) < 0 || keeper_acks(h, k) < 0)
			return -1;
		if ((pf.revents & POLLOUT) && !k->nq)
			return 0;
	}
}

/* Send s's ends to a keeper: 0, or -1 (none has room, or its channel is
 * full: waited for when wait). */
static int keep_send(struct hub *h, struct hsock *s, int wait)
{
	uint32_t place;
	struct keeper *k = keeper_place(h, &place);
	struct keep_msg m = {.op = KEEP_PUT};
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} c;
	struct iovec iov = {&m, sizeof(m)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf};
	struct cmsghdr *cm;
	int fds[2], n = 0;
	if (!k)
		return -1;
	if (s->poll_p >= 0)
		fds[n++] = s->poll_p, m.ends |= 1;
	if (s->poll_h >= 0)
		fds[n++] = s->poll_h, m.ends |= 2;
	m.place = place;
	m.seq = ++k->seq;
	memset(c.buf, 0, sizeof(c.buf));
	mh.msg_controllen = CMSG_SPACE((size_t)n * sizeof(int));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, (size_t)n * sizeof(int));
	if (wait && k->nq)
		keeper_flush(h, k);
	while (n && wait && (k->nq || sendmsg(k->ch, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) != sizeof(m))) {
		if (keeper_room(h, k) < 0) {
			log_warn("keeper %d does not take what it is sent", (int)k->pid);
			wait = 0;
		}
	}
	if (!n || (!wait && (k->nq || sendmsg(k->ch, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) != sizeof(m)))) {
		if (place == k->hi - 1)
			k->hi--;
		else
			k->free[k->nfree++] = place;
		return -1;
	}
	k->sid[place] = s->sid;
	s->poll_k = (uint16_t)(k->idx + 1);
	s->poll_place = place;
	s->poll_seq = m.seq;
	s->poll_sent = 1;
	h->keep_kept++;
	/* in flight, the keeper's from now: the channel holds them meanwhile */
	let_go(h, s);
	return 0;
}

void keep_trim(struct hub *h)
{
	uint32_t sid = h->lru_head, next;
	/* over the budget: a few at a time, skipping a keeper that is busy;
	 * near the limit: as many as it takes, waiting for the keepers (a
	 * readiness descriptor the hub cannot take back is a lost wake-up) */
	for (int n = 0; sid && keep_over(h, h->keep_budget) && (n < KEEP_TRIM_MAX || keep_over(h, h->keep_hard));
	     n++, sid = next) {
		struct hsock *s = h->socks[sid];
		next = s->lru_next;
		if (s->poll_kept || s->poll_sent)
			let_go(h, s);
		else
			keep_send(h, s, keep_over(h, h->keep_hard));
	}
}

void keep_add(struct hub *h, struct hsock *s)
{
	h->keep_local += (s->poll_p >= 0) + (s->poll_h >= 0);
	s->poll_ends = (uint8_t)((s->poll_p >= 0 ? 1 : 0) | (s->poll_h >= 0 ? 2 : 0));
	lru_append(h, s);
	keep_trim(h);
}

int keep_fd(struct hub *h, struct hsock *s, int end)
{
	int *fd = end ? &s->poll_h : &s->poll_p;
	struct keeper *k;
	if (!(s->poll_ends & (1u << end)))
		return -1;
	if (*fd < 0) {
		if (s->poll_sent && s->poll_k)
			keeper_wait(h, h->keepers[s->poll_k - 1], s);
		if (!s->poll_kept || !(k = h->keepers[s->poll_k - 1]) || k->dead)
			return -1;
		*fd = sys_pidfd_getfd(k->pidfd, KEEP_BASE + 2 * (int)s->poll_place + end);
		if (*fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			keep_trim(h);
			*fd = sys_pidfd_getfd(k->pidfd, KEEP_BASE + 2 * (int)s->poll_place + end);
		}
		if (*fd < 0)
			return -1;
		h->keep_local++;
	}
	if (h->lru_tail != s->sid)
		lru_append(h, s);
	keep_trim(h);
	return *fd;
}

void keep_close_end(struct hub *h, struct hsock *s, int end)
{
	int *fd = end ? &s->poll_h : &s->poll_p;
	if (!(s->poll_ends & (1u << end)))
		return;
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
		h->keep_local--;
	}
	s->poll_ends &= (uint8_t)~(1u << end);
	if (s->poll_k && (s->poll_sent || s->poll_kept)) {
		struct keeper *k = h->keepers[s->poll_k - 1];
		/* a put not yet answered is answered before this close is read */
		keeper_close(h, k, s->poll_place, s->poll_ends ? 1u << end : 3u);
		if (!s->poll_ends) {
			s->poll_k = 0;
			s->poll_sent = s->poll_kept = 0;
			h->keep_kept--;
		}
	}
	if (s->poll_p < 0 && s->poll_h < 0)
		lru_unlink(h, s);
}
