/*
 * bench_server.c - bench's server mode: one thread per accepted
 * connection (or a pool of threads or processes blocked in accept, each
 * serving the connection it took: -p, -P), serving echo, sink,
 * request/response or hold as its first byte asks (bench.c tells the
 * modes).
 */
#include "bench.h"

/* ---- server ---- */

static void serve_echo(int fd)
{
	size_t cap = 64 << 10;
	char *buf = malloc(cap);
	if (!buf)
		return;
	for (;;) {
		ssize_t n = read(fd, buf, cap);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || write_full(fd, buf, (size_t)n) < 0)
			break;
	}
	free(buf);
}

static void serve_sink(int fd)
{
	size_t cap = 256 << 10;
	char *buf = malloc(cap);
	uint64_t count = 0;
	if (!buf)
		return;
	for (;;) {
		ssize_t n = read(fd, buf, cap);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(buf);
			return; /* no count: the client reports the failure */
		}
		if (n == 0)
			break;
		count += (uint64_t)n;
	}
	free(buf);
	unsigned char out[8];
	for (int i = 0; i < 8; i++)
		out[i] = (unsigned char)(count >> (56 - 8 * i));
	write_full(fd, out, sizeof(out));
}

/* Read until EOF (or an error), discarding. */
static void drain(int fd)
{
	char buf[512];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
	}
}

static void *conn_thread(void *arg)
{
	int fd = (int)(intptr_t)arg;
	unsigned char m, req[RR_SIZE];
	if (read_full(fd, &m, 1) == 1) {
		switch (m) {
		case 'R':
			serve_echo(fd);
			break;
		case 'S':
			serve_sink(fd);
			break;
		case 'C':
			req[0] = m;
			if (read_full(fd, req + 1, RR_SIZE - 1) == RR_SIZE - 1 &&
			    write_full(fd, req, RR_SIZE) == 0)
				drain(fd);
			break;
		case 'H':
			if (write_full(fd, "k", 1) == 0)
				drain(fd);
			break;
		default:
			break;
		}
	}
	close(fd);
	return NULL;
}

/* A thread of a pool (-p, or a process of -P): accept, serve, again */
static int pool_lfd;
static void *pool_thread(void *arg)
{
	(void)arg;
	for (;;) {
		int one = 1, fd = accept(pool_lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			fail("accept", errno);
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		conn_thread((void *)(intptr_t)fd);
	}
	return NULL;
}

static void serve_pool(int lfd, long threads, long procs)
{
	pool_lfd = lfd;
	for (long i = 0; i < procs; i++) {
		pid_t pid = fork();
		if (pid < 0)
			fail("fork", errno);
		if (pid == 0)
			pool_thread(NULL);
	}
	if (procs) {
		for (;;)
			pause();
	}
	for (long i = 0; i < threads; i++) {
		pthread_t t;
		int rc = pthread_create(&t, NULL, pool_thread, NULL);
		if (rc)
			fail("pthread_create", rc);
	}
	for (;;)
		pause();
}

int cmd_server(int argc, char **argv)
{
	const char *bind_to = NULL;
	long secs = 3600, threads = 0, procs = 0;
	int opt;
	if (argc < 2)
		usage();
	int port = (int)parse_num(argv[1], "port");
	optind = 2;
	while ((opt = getopt(argc, argv, "a:t:p:P:")) != -1) {
		switch (opt) {
		case 'a': bind_to = optarg; break;
		case 't': secs = parse_num(optarg, "seconds"); break;
		case 'p': threads = parse_num(optarg, "threads"); break;
		case 'P': procs = parse_num(optarg, "processes"); break;
		default: usage();
		}
	}
	if (optind != argc || port < 1 || port > 65535)
		usage();
	set_deadline(secs);

	struct addr a;
	resolve(bind_to ? bind_to : "0.0.0.0", port, &a, AF_UNSPEC);
	int lfd = socket(a.ss.ss_family, SOCK_STREAM, 0);
	if (lfd < 0)
		fail("socket", errno);
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&a.ss, a.len) < 0)
		fail("bind", errno);
	if (listen(lfd, 1024) < 0)
		fail("listen", errno);
	printf("server port=%d ready=1\n", port);
	fflush(stdout);
	if (threads || procs)
		serve_pool(lfd, threads, procs);

	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				fprintf(stderr, "warning mode=server op=accept errno=%s\n", errname(errno));
				usleep(10000);
				continue;
			}
			fail("accept", errno);
		}
		one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pthread_t t;
		int rc = pthread_create(&t, &attr, conn_thread, (void *)(intptr_t)fd);
		if (rc) {
			fprintf(stderr, "warning mode=server op=pthread_create errno=%s\n", errname(rc));
			close(fd);
		}
	}
}
