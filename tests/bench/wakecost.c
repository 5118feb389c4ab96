/*
 * wakecost - what a wake-up costs on this machine: the futex wake-up of a
 * thread asleep on the waker's own processor, and of one asleep on
 * another processor that has gone idle.
 *
 *   wakecost [-n N] [-g GAP_US]
 *
 * A hub wakes the programs' threads (and they wake it), so these two
 * numbers bound what every hand-off of rshare costs: the system call the
 * waker makes, and the time until the woken thread runs.  On a virtual
 * machine a wake-up of an idle processor is an inter-processor interrupt
 * that leaves the guest (and a halted processor that the host must
 * schedule again), which may cost ten times the local one; kernel TCP's
 * wake-ups on a busy machine mostly stay on the waker's processor.
 *
 * The waker and the sleeper are pinned to the first two processors the
 * process may use (both to the first for "same").  N times (default 2000)
 * the waker waits until the sleeper sleeps, then GAP_US more (default 50,
 * so that an idle processor halts), and wakes it; it times its
 * FUTEX_WAKE, and the sleeper the time from just before that call to its
 * own return from FUTEX_WAIT.  Prints the medians:
 *   "wakecost same_wake_us=A same_run_us=B other_wake_us=C other_run_us=D"
 * (other_* are n/a with one processor).  Built by tests/bench/Makefile;
 * tests/bench/suite.sh prints it among the notes under its table.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { AWAKE, ASLEEP, WOKEN };

static _Atomic uint32_t state;
static _Atomic uint64_t t_wake;
static int cpu_waker, cpu_sleeper, n_iter;
static uint64_t *run_ns;

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

static void *sleeper(void *arg)
{
	(void)arg;
	pin(cpu_sleeper);
	for (int i = 0; i < n_iter;) {
		atomic_store(&state, ASLEEP);
		while (atomic_load(&state) == ASLEEP)
			syscall(SYS_futex, &state, FUTEX_WAIT_PRIVATE, ASLEEP, NULL, NULL, 0);
		run_ns[i++] = now_ns() - atomic_load(&t_wake);
	}
	atomic_store(&state, AWAKE); /* the waker's last wait ends */
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double median_us(uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return (double)v[n / 2] / 1000.0;
}

/* one case: the medians of the wake-up's call and of the time to run */
static void one(int waker, int sleeping, long gap_ns, double *wake_us, double *run_us)
{
	uint64_t *wake_ns = calloc((size_t)n_iter, sizeof(uint64_t));
	pthread_t t;
	run_ns = calloc((size_t)n_iter, sizeof(uint64_t));
	if (!wake_ns || !run_ns) {
		perror("calloc");
		exit(1);
	}
	cpu_waker = waker;
	cpu_sleeper = sleeping;
	pin(cpu_waker);
	atomic_store(&state, AWAKE);
	if (pthread_create(&t, NULL, sleeper, NULL)) {
		perror("pthread_create");
		exit(1);
	}
	for (int i = 0; i < n_iter; i++) {
		uint64_t t0, t1;
		while (atomic_load(&state) != ASLEEP)
			sched_yield(); /* on one processor the sleeper needs it to get there */
		t0 = now_ns();
		while ((long)(now_ns() - t0) < gap_ns)
			sched_yield(); /* the sleeper on this processor gets into its sleep */
		t0 = now_ns();
		atomic_store(&t_wake, t0);
		atomic_store(&state, WOKEN);
		syscall(SYS_futex, &state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		t1 = now_ns();
		wake_ns[i] = t1 - t0;
		while (atomic_load(&state) == WOKEN)
			sched_yield(); /* lets a sleeper on this processor run */
	}
	pthread_join(t, NULL);
	*wake_us = median_us(wake_ns, n_iter);
	*run_us = median_us(run_ns, n_iter);
	free(wake_ns);
	free(run_ns);
}

int main(int argc, char **argv)
{
	cpu_set_t set;
	int cpus[2], ncpu = 0, opt;
	long gap_us = 50;
	double sw, sr, ow = 0, orun = 0;
	n_iter = 2000;
	while ((opt = getopt(argc, argv, "n:g:")) != -1) {
		if (opt == 'n')
			n_iter = atoi(optarg);
		else if (opt == 'g')
			gap_us = atol(optarg);
		else
			goto usage;
	}
	if (optind != argc || n_iter < 1 || gap_us < 0)
		goto usage;
	if (sched_getaffinity(0, sizeof(set), &set) < 0) {
		perror("sched_getaffinity");
		return 1;
	}
	for (int c = 0; c < CPU_SETSIZE && ncpu < 2; c++)
		if (CPU_ISSET(c, &set))
			cpus[ncpu++] = c;
	one(cpus[0], cpus[0], gap_us * 1000, &sw, &sr);
	if (ncpu > 1)
		one(cpus[0], cpus[1], gap_us * 1000, &ow, &orun);
	if (ncpu > 1)
		printf("wakecost same_wake_us=%.1f same_run_us=%.1f other_wake_us=%.1f other_run_us=%.1f\n", sw, sr,
		       ow, orun);
	else
		printf("wakecost same_wake_us=%.1f same_run_us=%.1f other_wake_us=n/a other_run_us=n/a\n", sw, sr);
	return 0;
usage:
	fprintf(stderr, "usage: wakecost [-n N] [-g GAP_US]\n");
	return 2;
}
