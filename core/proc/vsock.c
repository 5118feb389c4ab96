/*
 * vsock.c - socket operations on arena slots, in the calling process: the
 * control path.
 *
 * Listening, connecting, accepting, shutting down and releasing a socket
 * are requests to the hub on this process's connection (client.c); the
 * data itself never goes through it (vsock_data.c).  This process counts
 * its descriptors of each slot and tells the hub when the last one goes.
 * A same-node connection (pair.h) has its rings in the pair segment of the
 * two pools: the first use of one maps it, asked of the hub (MSG_PAIRFD).
 */
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "vsock_int.h"
#include "client_int.h"

#include <sys/stat.h>

_Atomic uint32_t vs_proc_refs[CL_SLOTS];
_Atomic int vs_poll_fds[CL_SLOTS];
_Atomic uint8_t vs_poll_selfs[CL_SLOTS];
int (*vs_poll_forget)(uint32_t slot, int pollfd, int *sets, int max);

int vs_restartable(void)
{
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		uint64_t mask;
	} ks;
	for (int sig = 1; sig <= 64; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP || sig == 32 || sig == 33)
			continue;
		if (syscall(SYS_rt_sigaction, sig, NULL, &ks, 8) < 0)
			continue;
		if (ks.handler != SIG_DFL && ks.handler != SIG_IGN && !(ks.flags & SA_RESTART))
			return 0;
	}
	return 1;
}

int vs_sig_restarts(const uint32_t mark[2])
{
	if (vs_sig_since(mark, 0))
		return 0;
	return vs_sig_since(mark, 1) || vs_restartable();
}

/* ---- where a slot's rings are ---- */

/* the pair segments this process maps, and per slot the last one used */
struct vs_lmap_ent vs_lmap[CL_SLOTS];
static struct seg_map {
	uint32_t id;
	uint8_t *base;
} *segs;
static uint32_t nsegs, segs_cap;
static pthread_mutex_t seg_lock = PTHREAD_MUTEX_INITIALIZER;

/* A fork holds seg_lock from its prepare to its end (handover.c), before
 * the requests' locks, as vs_pair_map takes them: a child forked while
 * another thread mapped a segment would find it held for ever, and hang
 * in its first same-node connection (a thread-pool server that forked
 * clients did, once in some hundred runs). */
void vs_segs_lock(void)
{
	pthread_mutex_lock(&seg_lock);
}

void vs_segs_unlock(void)
{
	pthread_mutex_unlock(&seg_lock);
}

uint8_t *vs_pair_map(uint32_t slot, struct arena_slot *as, uint64_t key)
{
	struct msg_req q = {.op = MSG_PAIRFD, .slot = slot, .gen = as->gen};
	struct msg_rep r;
	uint8_t *base = NULL;
	int fd = -1;
	pthread_mutex_lock(&seg_lock);
	for (uint32_t i = 0; i < nsegs && !base; i++)
		if (segs[i].id == as->pair_seg)
			base = segs[i].base;
	if (!base && cl_rpc_fd(&q, &r, &fd) == 0 && !r.status && fd >= 0) {
		void *m = mmap(NULL, r.arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		struct pair_hdr *ph = m;
		if (m != MAP_FAILED && (ph->magic != PAIR_MAGIC || ph->version != PAIR_VERSION ||
					ph->id != r.pool_id || ph->bytes != r.arena_bytes)) {
			munmap(m, r.arena_bytes);
			m = MAP_FAILED;
		}
		if (m != MAP_FAILED && nsegs == segs_cap) {
			uint32_t cap = segs_cap ? segs_cap * 2 : 8;
			struct seg_map *n = realloc(segs, cap * sizeof(*n));
			if (!n) {
				munmap(m, r.arena_bytes);
				m = MAP_FAILED;
			} else {
				segs = n;
				segs_cap = cap;
			}
		}
		if (m != MAP_FAILED) {
			segs[nsegs].id = (uint32_t)r.pool_id;
			segs[nsegs++].base = base = m;
		}
	}
	if (fd >= 0)
		sys_close(fd);
	if (base && (uint32_t)key == as->pair_seg) {
		vs_lmap[slot].base = base;
		atomic_store_explicit(&vs_lmap[slot].key, key, memory_order_release);
	}
	pthread_mutex_unlock(&seg_lock);
	return base;
}

int vs_take_error(uint32_t slot)
{
	int e = atomic_exchange(&cl_slot(slot)->error, 0), fd = atomic_load(&vs_poll_fds[slot]) - 1, pe;
	socklen_t len = sizeof(pe);
	/* the readiness descriptor's POLLERR (core/hub/ready.c) goes with it,
	 * as a TCP socket's goes with the error it reports */
	if (e && fd >= 0 && !cl.sandboxed)
		syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_ERROR, &pe, &len);
	return e;
}

void vs_ref(uint32_t slot)
{
	atomic_fetch_add(&vs_proc_refs[slot], 1);
}

/* One descriptor fewer: 1 when it was this process's last (or it had
 * none counted), whatever other threads dup and close meanwhile. */
static int refs_drop(uint32_t slot)
{
	return count_down(&vs_proc_refs[slot]) <= 1;
}

_Atomic uint32_t vs_busy[CL_SLOTS];
static uint32_t vs_gone_gen[CL_SLOTS];
static uint8_t vs_gone_abort[CL_SLOTS];

static int release(uint32_t slot, uint32_t gen, int abort, int late);

__thread struct vs_wait_note vs_wait_notes[VS_WAIT_NOTES] __attribute__((tls_model("initial-exec")));
__thread uint32_t vs_wait_depth __attribute__((tls_model("initial-exec")));

static void wait_note_end(uint32_t d)
{
	struct vs_wait_note *n;
	if (d >= VS_WAIT_NOTES)
		return;
	n = &vs_wait_notes[d];
	if (n->asleep) {
		atomic_fetch_sub(n->asleep, 1); /* jumped out of the sleep itself */
		n->asleep = NULL;
	}
	vs_call_end(n->slot);
}

/* The calls of the noted waits that a jump left (vsock_int.h): those noted
 * above FRAME, the frame of the thread's call now. */
void vs_waits_left(uintptr_t frame)
{
	uint32_t d = vs_wait_depth;
	stack_t ss;
	if (d > VS_WAIT_NOTES || sigaltstack(NULL, &ss) < 0 || (ss.ss_flags & SS_ONSTACK))
		return; /* a note it cannot see, or a handler on its own stack */
	while (d && vs_wait_notes[d - 1].frame < frame)
		wait_note_end(--d);
	vs_wait_depth = d;
}

/* A call of the program's of FRAME (a close, near the preload's entry:
 * deep down the library it would lie below the notes) begins: the waits
 * a jump left end first. */
void vs_waits_check(uintptr_t frame)
{
	if (vs_wait_depth)
		vs_waits_left(frame);
}

/* A wait at depth D ended: the notes above it were left by jumps. */
void vs_waits_end_above(uint32_t d)
{
	while (vs_wait_depth > d + 1)
		wait_note_end(--vs_wait_depth);
}

void vs_fork_child(void)
{
	vs_wait_depth = 0;
	vs_accept_fork_child();
	/* the calls under way in the parent's other threads are not here */
	for (uint32_t i = cl_slot_at(0); i < CL_SLOTS; i = cl_slot_at(i + 1))
		if (atomic_load_explicit(&vs_busy[i], memory_order_relaxed))
			atomic_store_explicit(&vs_busy[i], 0, memory_order_relaxed);
}

/* The last call on a slot released meanwhile: whoever takes GONE back
 * does the release. */
void vs_release_waited(uint32_t slot)
{
	uint32_t gone = VS_BUSY_GONE;
	if (atomic_compare_exchange_strong(&vs_busy[slot], &gone, 0))
		release(slot, vs_gone_gen[slot], vs_gone_abort[slot], 1);
}

static int unref(uint32_t slot, uint32_t gen, int abort)
{
	uint32_t gone = VS_BUSY_GONE;
	if (!refs_drop(slot))
		return 0;
	vs_gone_gen[slot] = gen;
	vs_gone_abort[slot] = (uint8_t)abort;
	/* calls under way (a recv blocked in another thread): the last one
	 * releases the socket when it ends */
	if (atomic_fetch_or(&vs_busy[slot], VS_BUSY_GONE) & ~VS_BUSY_GONE)
		return 1;
	if (!atomic_compare_exchange_strong(&vs_busy[slot], &gone, 0))
		return 1; /* a call came and went: it released it */
	return release(slot, gen, abort, 0);
}

static int release(uint32_t slot, uint32_t gen, int abort, int late)
{
	struct msg_req q = {.op = MSG_RELEASE, .slot = slot, .gen = gen, .arg = abort};
	struct msg_rep r;
	int ret, sets[VS_FORGET_SETS], nsets = 0;
	/* What this process keeps of the slot goes before the hub hears of
	 * the release: from then on the hub may give the slot to a new
	 * socket, which another thread can accept and poll before the answer
	 * is here (and would find this socket's readiness descriptor). */
	int pf = atomic_exchange(&vs_poll_fds[slot], 0) - 1;
	int self = atomic_exchange(&vs_poll_selfs[slot], 0);
	if (pf < 0 && !(atomic_load(&cl_slot(slot)->flags) & SLOTF_PAIR_POOL)) {
		/* nothing to learn from the answer: ask for none (the hub handles
		 * this process's requests in order, so later ones see it done) */
		q.arg |= MSG_RELEASE_NOREPLY;
		return cl_rpc(&q, NULL, -1) < 0 ? -ECONNRESET : 1;
	}
	if (pf < 0) {
		/* the other end is this pool's, so maybe this process's, which
		 * on loopback finds its end of stream (or reset) the moment
		 * close returns: wait until the hub marked it */
		return cl_rpc(&q, &r, -1) < 0 ? -ECONNRESET : r.status ? r.status : 1;
	}
	if (vs_poll_forget)
		nsets = vs_poll_forget(slot, pf, sets, VS_FORGET_SETS);
	ret = cl_rpc(&q, &r, -1) < 0 ? -ECONNRESET : r.status ? r.status : 1;
	/* gen 1 in the reply: no process holds the socket any more, so the
	 * epoll sets forget it (the hub's copy would keep them waiting on
	 * it).  The program's own descriptor (self) it closes itself, after
	 * this; once it did (late), its number may name another file
	 * already, and is left alone. */
	if (ret == 1 && r.gen == 1 && !(self && late))
		for (int i = 0; i < nsets; i++)
			sys_epoll_del(sets[i], pf);
	if (!self)
		sys_close(pf);
	return ret;
}

/* A close with SO_LINGER on and a time of SECS, of the last descriptor
 * anywhere (this process's last, and the hub counts one holder): until
 * the peer has every byte written (the send ring is empty: the hub frees
 * its bytes as their writes complete), the time is up, a signal comes or
 * the connection ends, as tcp_close waits (sk_stream_wait_close).  On one
 * node the bytes in the ring are in the peer's buffer already: no wait. */
void vs_linger(uint32_t slot, int secs)
{
	struct arena_slot *as = cl_slot(slot);
	uint64_t end = sys_now_ns() + (uint64_t)secs * 1000000000u;
	uint32_t mark[2];
	vs_sig_mark(mark);
	if (secs <= 0 || as->pair_seg || atomic_load(&as->holders) > 1 || atomic_load(&vs_proc_refs[slot]) != 1)
		return;
	for (;;) {
		uint32_t seq = atomic_load(&as->wake_seq);
		uint64_t now = sys_now_ns();
		struct vring v;
		int w;
		if (atomic_load(&as->state) != SLOT_ESTABLISHED || vring_of(slot, as, 1, &v) < 0 ||
		    ring_load(&v.c->tail) == ring_load(&v.c->head) || now >= end)
			return;
		w = vs_wait_seq_for(as, seq, end - now);
		if (w == -EINTR || w == -ECONNRESET || vs_sig_since(mark, 1))
			return; /* a signal, as the kernel's; the hub gone */
	}
}

int vs_unref(uint32_t slot, uint32_t gen)
{
	return unref(slot, gen, 0);
}

int vs_unref_abort(uint32_t slot, uint32_t gen)
{
	return unref(slot, gen, 1);
}

int vs_held(uint32_t slot)
{
	return slot < CL_SLOTS && atomic_load(&vs_proc_refs[slot]);
}

uint32_t vs_nrefs(uint32_t slot)
{
	return slot < CL_SLOTS ? atomic_load(&vs_proc_refs[slot]) : 0;
}

int vs_listen(const union sockaddr_any *bound, int backlog, uint32_t rxsize, uint32_t txsize, int kfd,
	      int *evfd, uint32_t *slot, uint32_t *gen)
{
	struct msg_req q = {.op = MSG_LISTEN, .arg = backlog, .rxsize = rxsize, .txsize = txsize};
	struct msg_rep r;
	struct cl_adopted a;
	struct stat st;
	int efd, ret, got = -1;
	int v6only = 0;
	socklen_t vl = sizeof(v6only);
	if (kfd >= 0 && fstat(kfd, &st) == 0)
		q.token = (uint64_t)st.st_ino;
	/* the kernel's IPv6 listener takes IPv4 connections unless IPV6_V6ONLY;
	 * the hub matches connections to listeners as the kernel does */
	if (bound->sa.sa_family == AF_INET6 && kfd >= 0 &&
	    syscall(SYS_getsockopt, kfd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &vl) == 0 && v6only)
		q.flags |= MSG_LISTEN_V6ONLY;
	/* a process with no pool yet whose listener a pool registered (it came
	 * from a process that did not know it: Node's cluster hands its
	 * workers a bound socket) joins that pool */
	if (!cl.attached && !cl.kernel_only && q.token && cl_adopt(0, 0, kfd, &a) == 0) {
		sys_close(a.fd);
		*evfd = a.evfd;
		*slot = a.slot;
		*gen = a.gen;
		return 0;
	}
	if (cl_attach() < 0)
		return -ENOTCONN;
	efd = (int)syscall(SYS_eventfd2, 0, 04000 /* EFD_NONBLOCK */ | 02000000 /* EFD_CLOEXEC */);
	if (efd < 0)
		return -errno;
	efd = cl_hi_fd(efd);
	q.addr = *bound;
	pthread_mutex_lock(&cl_rpc_lock);
	ret = cl.p[0].ctl_fd >= 0 ? cl_rpc_on(cl.p[0].ctl_fd, &q, &r, efd, &got, 1) : -ECONNRESET;
	pthread_mutex_unlock(&cl_rpc_lock);
	if (ret < 0 || r.status) {
		sys_close(efd);
		if (got >= 0)
			sys_close(got);
		return ret < 0 ? ret : r.status;
	}
	if ((r.flags & MSG_ADOPT_LISTENER) && got >= 0) {
		/* the kernel listener is one another process of the pool
		 * registered already: this one shares it, and its wake-up */
		sys_close(efd);
		efd = cl_hi_fd(got);
	} else if (got >= 0) {
		sys_close(got);
	}
	*evfd = efd;
	*slot = r.slot;
	*gen = r.gen;
	if (r.flags & MSG_ADOPT_LISTENER)
		vs_ref(r.slot);
	else
		atomic_store(&vs_proc_refs[r.slot], 1);
	return 0;
}

int vs_port_in_use(const union sockaddr_any *addr)
{
	struct msg_req q = {.op = MSG_PORTCHECK};
	struct msg_rep r;
	q.addr = *addr;
	if (cl_attach() < 0 || cl_rpc(&q, &r, -1) < 0)
		return 0;
	return r.status == -EADDRINUSE;
}

int vs_connect_start(const union sockaddr_any *dst, const union sockaddr_any *local, uint32_t rxsize,
		     uint32_t txsize, int polled, uint32_t *slot, uint32_t *gen)
{
	struct msg_req q = {.op = MSG_CONNECT, .rxsize = rxsize, .txsize = txsize,
			    .arg = polled ? MSG_CONNECT_POLLFD : 0};
	struct msg_rep r;
	int ret, pf = -1;
	if (cl_attach() < 0)
		return 1;
	q.addr = *dst;
	q.local = *local;
	ret = polled ? cl_rpc_fd(&q, &r, &pf) : cl_rpc(&q, &r, -1);
	if (ret < 0)
		return 1; /* no hub: kernel TCP */
	if (r.status) {
		if (pf >= 0)
			sys_close(pf);
		return r.status == -EAFNOSUPPORT ? 1 : r.status;
	}
	atomic_store(&vs_proc_refs[r.slot], 1);
	if (pf >= 0)
		vs_poll_fd_given(r.slot, pf);
	*slot = r.slot;
	*gen = r.gen;
	return 0;
}

int vs_connect_wait(uint32_t slot, int64_t tmo_us)
{
	struct arena_slot *as = cl_slot(slot);
	uint64_t end = tmo_us > 0 ? sys_now_ns() + (uint64_t)tmo_us * 1000u : 0;
	uint32_t mark[2];
	int ret = 0;
	vs_sig_mark(mark);
	while (atomic_load(&as->state) == SLOT_CONNECTING) {
		uint32_t seq = atomic_load(&as->wake_seq);
		uint64_t now;
		if (atomic_load(&as->state) != SLOT_CONNECTING)
			break;
		if (end && (now = sys_now_ns()) >= end) {
			ret = -EINPROGRESS; /* SO_SNDTIMEO: the connect goes on */
			break;
		}
		ret = end ? vs_wait_seq_for(as, seq, end - now) : vs_wait_seq(as, seq);
		if (ret == -ECONNRESET)
			break;
		/* as connect(2): a handler without SA_RESTART ends the wait with
		 * EINTR (any handler under a time limit), and the connect goes
		 * on in the background */
		if (ret == -EINTR && (end || !vs_sig_restarts(mark)))
			break;
		/* a handler that ran as the sleep ended for nothing (the
		 * kernel's EINTR lost) ends it the same way */
		if (ret == 0 && atomic_load(&as->state) == SLOT_CONNECTING && vs_sig_since(mark, end != 0)) {
			ret = -EINTR;
			break;
		}
		ret = 0;
	}
	return ret;
}

int vs_connect(const union sockaddr_any *dst, const union sockaddr_any *local, uint32_t rxsize,
	       uint32_t txsize, int64_t tmo_us, uint32_t *slot, uint32_t *gen)
{
	struct msg_rep r;
	struct arena_slot *as;
	int ret = vs_connect_start(dst, local, rxsize, txsize, 0, &r.slot, &r.gen);
	if (ret)
		return ret;
	as = cl_slot(r.slot);
	ret = vs_connect_wait(r.slot, tmo_us);
	if (ret == -ECONNRESET) {
		/* the hub died under us: kernel TCP carries this one */
		atomic_store(&vs_proc_refs[r.slot], 0);
		return 1;
	}
	if (ret == -EINTR || ret == -EINPROGRESS) {
		*slot = r.slot;
		*gen = r.gen;
		return ret;
	}
	switch (atomic_load(&as->state)) {
	case SLOT_ESTABLISHED:
		*slot = r.slot;
		*gen = r.gen;
		return 0;
	case SLOT_FALLBACK:
		vs_unref(r.slot, r.gen);
		return 1;
	default:
		ret = vs_take_error(r.slot);
		vs_unref(r.slot, r.gen);
		return -(ret ? ret : ECONNREFUSED);
	}
}

int vs_accept(uint32_t slot, uint32_t gen, uint32_t *nslot, uint32_t *ngen, int *pfd)
{
	struct msg_req q = {.op = MSG_ACCEPT, .slot = slot, .gen = gen, .arg = pfd ? MSG_ACCEPT_POLLFD : 0};
	struct msg_rep r;
	int ret;
	if (!atomic_load(&cl_slot(slot)->acceptq))
		return -EAGAIN;
	ret = pfd ? cl_rpc_fd(&q, &r, pfd) : cl_rpc(&q, &r, -1);
	if (ret < 0)
		return ret;
	if (r.status) {
		if (pfd && *pfd >= 0)
			sys_close(*pfd);
		return r.status;
	}
	*nslot = r.slot;
	*ngen = r.gen;
	atomic_store(&vs_proc_refs[r.slot], 1);
	return 0;
}

/* shutdown(2) of a listener with SHUT_RD or SHUT_RDWR: the hub stops it,
 * as the kernel closes its listener */
int vs_listen_stop(uint32_t slot, uint32_t gen)
{
	struct msg_req q = {.op = MSG_SHUTDOWN, .slot = slot, .gen = gen, .arg = SHUT_RDWR};
	struct msg_rep r;
	int ret = cl_rpc(&q, &r, -1);
	return ret < 0 ? ret : r.status;
}

int vs_shutdown(uint32_t slot, uint32_t gen, int how)
{
	struct msg_req q = {.op = MSG_SHUTDOWN, .slot = slot, .gen = gen, .arg = how};
	struct msg_rep r;
	struct arena_slot *as = cl_slot(slot);
	uint32_t st = atomic_load(&as->state);
	int ret;
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return -EINVAL;
	if (st != SLOT_ESTABLISHED)
		return -ENOTCONN; /* as the kernel's TCP_CLOSE: reset or closed */
	if (how != SHUT_WR)
		atomic_fetch_or(&as->flags, SLOTF_RX_SHUT);
	if (how != SHUT_RD) {
		if (atomic_fetch_or(&as->flags, SLOTF_TX_SHUT) & SLOTF_TX_SHUT)
			return 0;
		vs_lock(&as->tx_lock, &as->tx_in); /* a writer in the middle of a copy finishes first */
		pthread_mutex_unlock(&as->tx_lock);
	}
	ret = cl_rpc(&q, &r, -1);
	if (vs_poll_fds[slot])
		vs_poll_bell(slot); /* pollers see it too */
	/* wake this pool's own sleepers so they see the shutdown */
	arena_wake_all(as);
	return ret < 0 ? ret : r.status;
}
