/*
 * sys.h - raw system calls for code that runs inside the preload library.
 *
 * librshare.so defines close(), read(), connect() and friends itself, so a
 * plain call from core code would land back in the interposer.  Core code
 * that the library links uses these instead; they go straight to the kernel.
 */
#ifndef RSHARE_SYS_H
#define RSHARE_SYS_H

#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* CLOCK_MONOTONIC in nanoseconds (the vDSO's, no system call): spins,
 * timeouts, and the looks of the hub and its transports */
static inline uint64_t sys_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A system call without syscall(3), which the library defines too
 * (preload/syscall.c: a program's raw close must forget its socket, the
 * library's own must not, and the sanitizers' start calls in before the
 * library is set up): the kernel's answer, -errno on failure.  A macro,
 * so that a function the sanitizers must not instrument can use it. */
#if defined(__x86_64__)
#define SYS_RAW6(n, a, b, c, d, e, f)                                                              \
	({                                                                                         \
		long r_;                                                                           \
		register long r10_ __asm__("r10") = (long)(d), r8_ __asm__("r8") = (long)(e),      \
					       r9_ __asm__("r9") = (long)(f);                      \
		__asm__ volatile("syscall"                                                         \
				 : "=a"(r_)                                                        \
				 : "a"((long)(n)), "D"((long)(a)), "S"((long)(b)), "d"((long)(c)), \
				   "r"(r10_), "r"(r8_), "r"(r9_)                                   \
				 : "rcx", "r11", "memory");                                        \
		r_;                                                                                \
	})
#elif defined(__aarch64__)
#define SYS_RAW6(n, a, b, c, d, e, f)                                                              \
	({                                                                                         \
		register long x8_ __asm__("x8") = (long)(n), x0_ __asm__("x0") = (long)(a),        \
			      x1_ __asm__("x1") = (long)(b), x2_ __asm__("x2") = (long)(c),        \
			      x3_ __asm__("x3") = (long)(d), x4_ __asm__("x4") = (long)(e),        \
			      x5_ __asm__("x5") = (long)(f);                                       \
		__asm__ volatile("svc 0"                                                           \
				 : "+r"(x0_)                                                       \
				 : "r"(x8_), "r"(x1_), "r"(x2_), "r"(x3_), "r"(x4_), "r"(x5_)      \
				 : "memory");                                                      \
		x0_;                                                                               \
	})
#else
#define SYS_RAW6(n, a, b, c, d, e, f)                                                              \
	({                                                                                         \
		long r_ = syscall((n), (a), (b), (c), (d), (e), (f));                              \
		r_ < 0 ? -(long)errno : r_;                                                        \
	})
#endif

/* the same as syscall(3) answers: -1 and errno on failure */
static inline long sys_raw6(long n, long a, long b, long c, long d, long e, long f)
{
	long r = SYS_RAW6(n, a, b, c, d, e, f);
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

static inline int sys_close(int fd) { return (int)sys_raw6(SYS_close, fd, 0, 0, 0, 0, 0); }
static inline ssize_t sys_read(int fd, void *b, size_t n) { return syscall(SYS_read, fd, b, n); }
static inline ssize_t sys_write(int fd, const void *b, size_t n) { return syscall(SYS_write, fd, b, n); }
static inline int sys_socket(int d, int t, int p) { return (int)syscall(SYS_socket, d, t, p); }
static inline int sys_connect(int fd, const void *a, socklen_t l) { return (int)syscall(SYS_connect, fd, a, l); }
static inline ssize_t sys_sendmsg(int fd, const struct msghdr *m, int f) { return syscall(SYS_sendmsg, fd, m, f); }
static inline ssize_t sys_recvmsg(int fd, struct msghdr *m, int f) { return syscall(SYS_recvmsg, fd, m, f); }
static inline int sys_fcntl(int fd, int cmd, long arg) { return (int)syscall(SYS_fcntl, fd, cmd, arg); }
static inline int sys_epoll_del(int ep, int fd) { return (int)syscall(SYS_epoll_ctl, ep, EPOLL_CTL_DEL, fd, NULL); }
static inline int sys_dup3(int o, int n, int f) { return (int)syscall(SYS_dup3, o, n, f); }
/* never waiting, whatever O_NONBLOCK another holder of the file set */
static inline ssize_t sys_recv_now(int fd, void *b, size_t n) { return syscall(SYS_recvfrom, fd, b, n, MSG_DONTWAIT, NULL, NULL); }
static inline ssize_t sys_send_now(int fd, const void *b, size_t n) { return syscall(SYS_sendto, fd, b, n, MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0); }

/* *n less one, but never below 0, whatever other threads or processes do
 * to it meanwhile: the value it had */
static inline uint32_t count_down(_Atomic uint32_t *n)
{
	uint32_t v = atomic_load(n);
	while (v && !atomic_compare_exchange_weak(n, &v, v - 1))
		;
	return v;
}

/* a pause in a spin loop */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static inline long sys_futex(_Atomic uint32_t *uaddr, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, uaddr, op, val, ts, NULL, 0);
}

#endif
