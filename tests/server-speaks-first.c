/*
 * server-speaks-first - a server that writes first (as SSH, SMTP, FTP and
 * MySQL do) and a nonblocking client that waits for those bytes.
 *
 *   server-speaks-first -s [-w WORKERS] PORT
 *       listens, forks WORKERS (2) that each accept in a loop and write
 *       the 8-byte greeting at once, then read until EOF and close;
 *       prints "ready" once listening.
 *   server-speaks-first -c N ADDR PORT
 *       N times: a nonblocking socket, connect (EINPROGRESS), poll for
 *       POLLOUT, SO_ERROR, poll for POLLIN (2 s at most), read the
 *       greeting, close; prints "done got=G lost=L bad=B errors=E".
 *
 * The client's line is the observable outcome: the same on kernel TCP and
 * on rshare.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define GREETING "HELLO-8\n"
#define GLEN 8

static void serve(int lfd)
{
	for (;;) {
		char buf[256];
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		if (write(fd, GREETING, GLEN) != GLEN) {
			close(fd);
			continue;
		}
		while (read(fd, buf, sizeof(buf)) > 0)
			;
		close(fd);
	}
}

static int server(int workers, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 128) < 0) {
		perror("server");
		return 1;
	}
	for (int i = 0; i < workers; i++)
		if (fork() == 0)
			serve(lfd);
	printf("ready\n");
	fflush(stdout);
	while (wait(NULL) > 0 || errno == EINTR)
		;
	return 0;
}

/* 0 got the greeting, 1 nothing came in 2 s, 2 wrong bytes, 3 an error */
static int one_client(const struct sockaddr_in *a)
{
	char buf[GLEN + 1];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), err = 0, got = 0;
	socklen_t el = sizeof(err);
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	if (fd < 0)
		return 3;
	if (connect(fd, (const struct sockaddr *)a, sizeof(*a)) < 0 && errno != EINPROGRESS)
		goto fail;
	if (poll(&p, 1, 5000) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err)
		goto fail;
	while (got < GLEN) {
		ssize_t n;
		p.events = POLLIN;
		if (poll(&p, 1, 2000) != 1) {
			close(fd);
			return 1;
		}
		n = read(fd, buf + got, (size_t)(GLEN - got));
		if (n <= 0 && !(n < 0 && errno == EAGAIN))
			goto fail;
		if (n > 0)
			got += (int)n;
	}
	close(fd);
	return memcmp(buf, GREETING, GLEN) ? 2 : 0;
fail:
	close(fd);
	return 3;
}

static int client(int n, const char *addr, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int count[4] = {0};
	if (inet_pton(AF_INET, addr, &a.sin_addr) != 1) {
		fprintf(stderr, "bad address %s\n", addr);
		return 2;
	}
	for (int i = 0; i < n; i++)
		count[one_client(&a)]++;
	printf("done got=%d lost=%d bad=%d errors=%d\n", count[0], count[1], count[2], count[3]);
	return count[0] == n ? 0 : 1;
}

int main(int argc, char **argv)
{
	int opt, workers = 2, n = 0, srv = 0;
	signal(SIGPIPE, SIG_IGN);
	while ((opt = getopt(argc, argv, "sw:c:")) != -1) {
		if (opt == 's')
			srv = 1;
		else if (opt == 'w')
			workers = atoi(optarg);
		else if (opt == 'c')
			n = atoi(optarg);
		else
			return 2;
	}
	if (srv && optind + 1 == argc)
		return server(workers, atoi(argv[optind]));
	if (n > 0 && optind + 2 == argc)
		return client(n, argv[optind], atoi(argv[optind + 1]));
	fprintf(stderr, "usage: server-speaks-first -s [-w N] PORT | -c N ADDR PORT\n");
	return 2;
}
