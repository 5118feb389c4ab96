/*
 * hub-death-client: connect to an echo server, echo once, then block in
 * recv() with nothing coming; print how that recv ended and after how long
 * (the test kills this node's hub meanwhile).  Then connect again and echo
 * once more, to show new connections still work.
 *
 * usage: hub-death-client HOST PORT
 * prints: "blocked", then "recv=R errno=NAME secs=S", then "again ok"
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int dial(const char *host, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || inet_pton(AF_INET, host, &a.sin_addr) != 1 ||
	    connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		fprintf(stderr, "hub-death-client: connect: %s\n", strerror(errno));
		exit(1);
	}
	return fd;
}

static void echo_once(int fd)
{
	char b[5];
	if (write(fd, "ping", 4) != 4 || read(fd, b, 4) != 4 || memcmp(b, "ping", 4)) {
		fprintf(stderr, "hub-death-client: echo failed: %s\n", strerror(errno));
		exit(1);
	}
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int fd, fd2, e;
	ssize_t r;
	char b[16];
	double t0;
	if (argc != 3)
		return 2;
	fd = dial(argv[1], atoi(argv[2]));
	echo_once(fd);
	printf("blocked\n");
	fflush(stdout);
	t0 = now();
	r = recv(fd, b, sizeof(b), 0);
	e = errno;
	printf("recv=%zd errno=%s secs=%.2f\n", r, r < 0 ? strerrorname_np(e) : "0", now() - t0);
	fflush(stdout);
	fd2 = dial(argv[1], atoi(argv[2]));
	echo_once(fd2);
	printf("again ok\n");
	fflush(stdout);
	close(fd2);
	close(fd);
	return 0;
}
