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
#include <stdint.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* close(2) without syscall(3), which the library defines too (preload's
 * syscall.c: a program's raw close must forget its socket, the library's
 * own must not) */
static inline int sys_close(int fd)
{
#if defined(__x86_64__)
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"((long)SYS_close), "D"((long)fd) : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = SYS_close, x0 __asm__("x0") = fd;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8) : "memory");
	long r = x0;
#else
	long r = syscall(SYS_close, fd);
	return (int)r;
#endif
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return (int)r;
}
static inline ssize_t sys_read(int fd, void *b, size_t n) { return syscall(SYS_read, fd, b, n); }
static inline ssize_t sys_write(int fd, const void *b, size_t n) { return syscall(SYS_write, fd, b, n); }
static inline int sys_socket(int d, int t, int p) { return (int)syscall(SYS_socket, d, t, p); }
static inline int sys_connect(int fd, const void *a, socklen_t l) { return (int)syscall(SYS_connect, fd, a, l); }
static inline ssize_t sys_sendmsg(int fd, const struct msghdr *m, int f) { return syscall(SYS_sendmsg, fd, m, f); }
static inline ssize_t sys_recvmsg(int fd, struct msghdr *m, int f) { return syscall(SYS_recvmsg, fd, m, f); }
static inline int sys_fcntl(int fd, int cmd, long arg) { return (int)syscall(SYS_fcntl, fd, cmd, arg); }
static inline int sys_dup3(int o, int n, int f) { return (int)syscall(SYS_dup3, o, n, f); }
/* never waiting, whatever O_NONBLOCK another holder of the file set */
static inline ssize_t sys_recv_now(int fd, void *b, size_t n) { return syscall(SYS_recvfrom, fd, b, n, MSG_DONTWAIT, NULL, NULL); }
static inline ssize_t sys_send_now(int fd, const void *b, size_t n) { return syscall(SYS_sendto, fd, b, n, MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0); }

static inline long sys_futex(_Atomic uint32_t *uaddr, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, uaddr, op, val, ts, NULL, 0);
}

#endif
