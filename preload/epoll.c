/*
 * epoll.c - epoll over rshare sockets: its records, epoll_ctl and the
 * checked epoll_wait.
 *
 * An rshare connection is registered as its readiness descriptor under
 * a tag of ours (the record's index, above a per-process magic), and
 * epoll_wait checks each tagged event against the socket's true state
 * before it hands it on with the program's own data: like poll, it never
 * reports more than is true (a byte of the hub's can land just after the
 * program read the data it announced, and some programs count a read that
 * finds nothing as an error).  A record lives until the program deletes
 * it or this process closes its last descriptor of the socket; when no
 * process holds the socket any more its registrations are deleted too, as
 * the kernel forgets a closed socket (ep_forget, called by core/proc).
 * Records are per program descriptor: two descriptors of one socket in
 * one set are two registrations, as on the kernel (the second through a
 * private dup of the readiness descriptor).
 * Events of the program's other descriptors pass untouched.
 *
 * A listener is registered twice, its kernel listener and the hub's
 * wake-up with the same data.
 */
#include <sys/random.h>
#include <sys/syscall.h>

#include "preload.h"

struct ep_rec {
	int epfd, fd;               /* the set, and the program's descriptor in it */
	int kfd;                    /* what the kernel's set holds: the readiness
				       descriptor, or (own) a private dup of it for a
				       second descriptor of one socket in one set */
	int own;
	uint32_t slot, gen, events, used;
	uint32_t rgen;              /* bumped at each reuse: in the tag */
	uint64_t data;
	int next;                   /* next record of the slot (or free) + 1, 0: none */
};
static struct ep_rec *ep_recs;
static int ep_n, ep_cap, ep_free, ep_live; /* ep_free: first free record + 1 */
static int ep_head[CL_SLOTS];    /* first record of a slot + 1 */
static uint64_t ep_magic;
static pthread_mutex_t ep_lock = PTHREAD_MUTEX_INITIALIZER;

/* ep_lock, with the program's signal handlers put off while it is held
 * (core/proc/vsock_sig.c): a handler that closed an rshare socket (which
 * forgets its records here) would wait for ever on its own thread's lock */
static void ep_enter(void)
{
	vs_sig_hold_begin();
	pthread_mutex_lock(&ep_lock);
}

static void ep_leave(void)
{
	pthread_mutex_unlock(&ep_lock);
	vs_sig_hold_end();
}

#define EP_IDX_BITS 20
static uint64_t ep_tag(int i)
{
	return ep_magic | (uint64_t)(ep_recs[i].rgen & 0xfff) << EP_IDX_BITS | (uint32_t)i;
}

/* the record for (epfd, fd), or -1; under ep_lock */
static int ep_find(int epfd, int fd, uint32_t slot)
{
	for (int i = ep_head[slot] - 1; i >= 0; i = ep_recs[i].next - 1)
		if (ep_recs[i].epfd == epfd && ep_recs[i].fd == fd)
			return i;
	return -1;
}

/* Another descriptor of the slot's socket in the set already? */
static int ep_in_set(int epfd, uint32_t slot)
{
	for (int i = ep_head[slot] - 1; i >= 0; i = ep_recs[i].next - 1)
		if (ep_recs[i].epfd == epfd)
			return 1;
	return 0;
}

static int ep_new(void)
{
	int i;
	if (ep_free) {
		i = ep_free - 1;
		ep_free = ep_recs[i].next;
		return i;
	}
	if (ep_n == 1 << EP_IDX_BITS)
		return -1;
	if (ep_n == ep_cap) {
		int c = ep_cap ? ep_cap * 2 : 64;
		struct ep_rec *m = realloc(ep_recs, (size_t)c * sizeof(*m));
		if (!m)
			return -1;
		ep_recs = m;
		ep_cap = c;
	}
	ep_recs[ep_n].rgen = 0;
	return ep_n++;
}

static void ep_unlink(int i)
{
	struct ep_rec *r = &ep_recs[i];
	for (int *pp = &ep_head[r->slot]; *pp; pp = &ep_recs[*pp - 1].next)
		if (*pp - 1 == i) {
			*pp = r->next;
			break;
		}
	if (r->own) {
		/* the set keys on (file, descriptor): gone only when told */
		R(epoll_ctl)(r->epfd, EPOLL_CTL_DEL, r->kfd, NULL);
		sys_close(r->kfd);
		r->own = 0;
	}
	r->used = 0;
	r->rgen++;
	r->next = ep_free;
	ep_free = i + 1;
	__atomic_store_n(&ep_live, ep_live - 1, __ATOMIC_RELAXED);
}

int ep_forget(uint32_t slot, int pf, int *sets, int max)
{
	int n = 0;
	ep_enter();
	while (ep_head[slot]) {
		int i = ep_head[slot] - 1;
		if (ep_recs[i].kfd == pf && n < max)
			sets[n++] = ep_recs[i].epfd;
		ep_unlink(i);
	}
	ep_leave();
	return n;
}

/* The sets a listener's wake-up is in, for the program's descriptor fd:
 * the wake-up is one file that every holder of the listener shares (and
 * a process that got the listener over a unix socket too), so closing fd
 * does not take it out of a set, as the kernel takes out a descriptor
 * whose file is gone; ep_listener_closing does, or the set would go on
 * reporting fd, by then another descriptor, at every new connection.
 * (The kernel listener stays in, as on kernel TCP when a process that
 * shares it closes its descriptor.) */
static struct ep_lis {
	int epfd, fd, evfd;
} *ep_lis;
static int ep_nlis, ep_lis_cap;

static void ep_lis_note(int epfd, int op, int fd, int evfd)
{
	int i;
	ep_enter();
	for (i = 0; i < ep_nlis; i++)
		if (ep_lis[i].epfd == epfd && ep_lis[i].fd == fd)
			break;
	if (op == EPOLL_CTL_DEL && i < ep_nlis)
		ep_lis[i] = ep_lis[--ep_nlis];
	if (op == EPOLL_CTL_ADD && i == ep_nlis) {
		if (ep_nlis == ep_lis_cap) {
			int c = ep_lis_cap ? ep_lis_cap * 2 : 8;
			struct ep_lis *m = realloc(ep_lis, (size_t)c * sizeof(*m));
			if (m) {
				ep_lis = m;
				ep_lis_cap = c;
			}
		}
		if (ep_nlis < ep_lis_cap)
			ep_lis[ep_nlis++] = (struct ep_lis){epfd, fd, evfd};
	}
	ep_leave();
}

void ep_listener_closing(int fd)
{
	ep_enter();
	for (int i = 0; i < ep_nlis; i++)
		if (ep_lis[i].fd == fd) {
			R(epoll_ctl)(ep_lis[i].epfd, EPOLL_CTL_DEL, ep_lis[i].evfd, NULL);
			ep_lis[i--] = ep_lis[--ep_nlis];
		}
	ep_leave();
}

/* a listener: both the kernel listener and the hub's wake-up, same data */
static int ep_ctl_listen(int epfd, int op, int fd, struct pfd *p, struct epoll_event *ev)
{
	struct epoll_event e2;
	int r = R(epoll_ctl)(epfd, op, fd, ev);
	if (r < 0)
		return r;
	if (ev) {
		e2 = *ev;
		e2.events &= ~(uint32_t)(EPOLLOUT | EPOLLPRI);
	}
	if (R(epoll_ctl)(epfd, op, p->evfd, ev ? &e2 : NULL) < 0 && op == EPOLL_CTL_ADD) {
		int e = errno;
		R(epoll_ctl)(epfd, EPOLL_CTL_DEL, fd, NULL);
		errno = e;
		return -1;
	}
	ep_lis_note(epfd, op, fd, p->evfd);
	return 0;
}

/* EPOLL_CTL_ADD of program descriptor fd, whose socket's readiness
 * descriptor is pf, under a new record's tag (i: the record there is
 * already, or -1).  A second descriptor of one socket in one set gets a
 * private dup of pf, as the kernel keeps both; under ep_lock */
static int ep_ctl_add(int epfd, int fd, int pf, const struct pfd *p, const struct epoll_event *ev, int i)
{
	struct epoll_event e2;
	int r, kfd = pf;
	if (i >= 0) {
		/* A record for this set already: live (the kernel says EEXIST),
		 * or left by a set that was closed and whose number came back
		 * (the kernel takes the registration: the record is renewed) */
		e2 = (struct epoll_event){.events = ev->events, .data.u64 = ep_tag(i)};
		r = R(epoll_ctl)(epfd, EPOLL_CTL_ADD, ep_recs[i].kfd, &e2);
		if (r == 0) {
			ep_recs[i].events = ev->events;
			ep_recs[i].data = ev->data.u64;
		}
		return r;
	}
	if ((i = ep_new()) < 0) {
		errno = ENOMEM;
		return -1;
	}
	if (ep_in_set(epfd, p->slot) && (kfd = cl_hi_fd(sys_fcntl(pf, F_DUPFD_CLOEXEC, 0))) < 0) {
		kfd = pf;
		errno = EMFILE;
		r = -1;
	} else {
		e2 = (struct epoll_event){.events = ev->events, .data.u64 = ep_tag(i)};
		r = R(epoll_ctl)(epfd, EPOLL_CTL_ADD, kfd, &e2);
	}
	if (r < 0) {
		int e = errno;
		if (kfd != pf)
			sys_close(kfd);
		ep_recs[i].next = ep_free;
		ep_recs[i].used = 0;
		ep_recs[i].rgen++;
		ep_free = i + 1;
		errno = e;
		return r;
	}
	ep_recs[i] = (struct ep_rec){.epfd = epfd, .fd = fd, .kfd = kfd, .own = kfd != pf, .slot = p->slot,
				     .gen = p->gen, .events = ev->events, .used = 1, .data = ev->data.u64,
				     .next = ep_head[p->slot], .rgen = ep_recs[i].rgen};
	ep_head[p->slot] = i + 1;
	__atomic_store_n(&ep_live, ep_live + 1, __ATOMIC_RELAXED);
	return r;
}

/* EPOLL_CTL_MOD of pf, record i (or -1); under ep_lock */
static int ep_ctl_mod(int epfd, int pf, struct epoll_event *ev, int i)
{
	struct epoll_event e2;
	int r;
	if (i < 0) {
		/* registered before this process knew of it (an exec): as is */
		return R(epoll_ctl)(epfd, EPOLL_CTL_MOD, pf, ev);
	}
	e2 = (struct epoll_event){.events = ev->events, .data.u64 = ep_tag(i)};
	r = R(epoll_ctl)(epfd, EPOLL_CTL_MOD, ep_recs[i].kfd, &e2);
	if (r == 0) {
		ep_recs[i].events = ev->events;
		ep_recs[i].data = ev->data.u64;
	}
	return r;
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct pfd *p = rs_of(fd);
	int r, pf, i;
	if (!p)
		return R(epoll_ctl)(epfd, op, fd, ev);
	if (p->kind == FD_LISTEN)
		return ep_ctl_listen(epfd, op, fd, p, ev);
	pf = rd_fd(fd, p);
	if (pf < 0) {
		/* no descriptor to be had (the kernel's ENOMEM: no room for the
		 * registration), or the socket went with its hub */
		errno = -pf == EMFILE || -pf == ENFILE ? ENOMEM : -pf == EBADF ? EPERM : -pf;
		return -1;
	}
	if ((op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD) && !ev) {
		errno = EFAULT;
		return -1;
	}
	ep_enter();
	while (!ep_magic) {
		uint32_t m = 0;
		if (getrandom(&m, sizeof(m), 0) == sizeof(m))
			ep_magic = (uint64_t)(m | 0x80000000u) << 32;
	}
	i = ep_find(epfd, fd, p->slot);
	switch (op) {
	case EPOLL_CTL_ADD:
		r = ep_ctl_add(epfd, fd, pf, p, ev, i);
		break;
	case EPOLL_CTL_MOD:
		r = ep_ctl_mod(epfd, pf, ev, i);
		break;
	case EPOLL_CTL_DEL:
		r = R(epoll_ctl)(epfd, op, i >= 0 ? ep_recs[i].kfd : pf, ev);
		if (r == 0 && i >= 0)
			ep_unlink(i);
		break;
	default:
		errno = EINVAL;
		r = -1;
	}
	ep_leave();
	return r;
}


/* Our events into the program's: checked, its data put back; what is not
 * true is dropped (a one-shot registration armed again). */
static int ep_filter(int epfd, struct epoll_event *ev, int n)
{
	int out = 0;
	ep_enter();
	for (int k = 0; k < n; k++) {
		uint64_t d = ev[k].data.u64;
		struct ep_rec *r;
		unsigned m;
		uint32_t idx = (uint32_t)d & ((1u << EP_IDX_BITS) - 1);
		if ((d & 0xffffffff00000000ull) != ep_magic || idx >= (uint32_t)ep_n) {
			ev[out++] = ev[k];
			continue;
		}
		r = &ep_recs[idx];
		if (!r->used || d != ep_tag((int)idx) || cl_slot(r->slot)->gen != r->gen)
			continue; /* a socket this process let go of */
		/* what the kernel claimed and is not true is settled (the
		 * descriptor made to say so again, and to change when it
		 * does); what is reported is what the settling found true: the
		 * state may have changed since the first look, and an edge
		 * dropped then, with nothing settled, would not come again */
		m = vs_poll_mask(r->slot);
		if (ev[k].events & ~m & (EPOLLIN | EPOLLOUT))
			m = vs_poll_settle(r->slot, ev[k].events);
		m &= r->events | EPOLLERR | EPOLLHUP;
		if (!m) {
			if (r->events & EPOLLONESHOT) {
				struct epoll_event e2 = {.events = r->events, .data.u64 = d};
				R(epoll_ctl)(epfd, EPOLL_CTL_MOD, r->kfd, &e2);
			}
			continue;
		}
		ev[out].events = m;
		ev[out++].data.u64 = r->data;
	}
	ep_leave();
	return out;
}

static int ep_wait(int epfd, struct epoll_event *ev, int max, const struct timespec *tmo,
		   const sigset_t *mask)
{
	struct timespec end = {0, 0};
	if (tmo) {
		tmo_deadline(tmo, &end);
	}
	for (;;) {
		long ms = tmo ? tmo_ms_left(&end) : -1;
		int n = R(epoll_pwait)(epfd, ev, max, ms > INT_MAX ? INT_MAX : (int)ms, mask);
		if (n <= 0)
			return n;
		n = ep_filter(epfd, ev, n);
		if (n || (tmo && tmo_ms_left(&end) == 0))
			return n;
	}
}

int epoll_wait(int epfd, struct epoll_event *ev, int max, int ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
	if (!__atomic_load_n(&ep_live, __ATOMIC_RELAXED) || max <= 0)
		return R(epoll_wait)(epfd, ev, max, ms);
	return ep_wait(epfd, ev, max, ms < 0 ? NULL : &t, NULL);
}

int epoll_pwait(int epfd, struct epoll_event *ev, int max, int ms, const sigset_t *mask)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
	if (!__atomic_load_n(&ep_live, __ATOMIC_RELAXED) || max <= 0)
		return R(epoll_pwait)(epfd, ev, max, ms, mask);
	return ep_wait(epfd, ev, max, ms < 0 ? NULL : &t, mask);
}

int epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *tmo,
		 const sigset_t *mask)
{
	if (!__atomic_load_n(&ep_live, __ATOMIC_RELAXED) || max <= 0 || (tmo && (tmo->tv_sec < 0 || tmo->tv_nsec < 0 || tmo->tv_nsec >= 1000000000)))
		return (int)syscall(SYS_epoll_pwait2, epfd, ev, max, tmo, mask, 8);
	return ep_wait(epfd, ev, max, tmo, mask);
}

void ep_rekey(uint32_t slot, int from, int to)
{
	ep_enter();
	for (int i = ep_head[slot] - 1; i >= 0; i = ep_recs[i].next - 1) {
		struct ep_rec *r = &ep_recs[i];
		struct epoll_event e = {.events = r->events, .data.u64 = ep_tag(i)};
		if (r->kfd != from)
			continue;
		/* registered anew: a one-shot one is armed again, and says only
		 * what is true (ep_filter) */
		if (R(epoll_ctl)(r->epfd, EPOLL_CTL_ADD, to, &e) == 0 || errno == EEXIST)
			R(epoll_ctl)(r->epfd, EPOLL_CTL_DEL, from, NULL);
		r->kfd = to;
	}
	ep_leave();
}

/* A nonblocking connect given to kernel TCP (rs_settle, connect.c): the
 * epoll sets that waited on its readiness descriptor wait on the socket
 * fd itself from now on, and its entry becomes FD_TCP with its kernel
 * connect under way, both under ep_lock so that one thread does it.
 * 0 when another thread did it already. */
int ep_hand_over(int fd, struct pfd *p, uint32_t slot)
{
	int pf;
	(void)fd; /* each record knows its own descriptor */
	ep_enter();
	if (!p->pending || p->slot != slot) {
		ep_leave();
		return 0;
	}
	pf = vs_poll_fd_cached(slot);
	while (ep_head[slot]) {
		int i = ep_head[slot] - 1;
		struct epoll_event e = {.events = ep_recs[i].events, .data.u64 = ep_recs[i].data};
		if (pf >= 0)
			R(epoll_ctl)(ep_recs[i].epfd, EPOLL_CTL_DEL, ep_recs[i].kfd, NULL);
		R(epoll_ctl)(ep_recs[i].epfd, EPOLL_CTL_ADD, ep_recs[i].fd, &e);
		ep_unlink(i);
	}
	/* pending 2: its kernel connect is under way, later connects are the kernel's */
	pfd_set(p, &(struct pfd){.kind = FD_TCP, .family = p->family, .pending = 2});
	ep_leave();
	return 1;
}
