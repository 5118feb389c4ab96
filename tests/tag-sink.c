/*
 * tag-sink [-w HOLDFILE] PORT
 *
 * Listens on 0.0.0.0:PORT, prints "ready"; serves each connection in a
 * thread: reads everything until EOF, counting bytes and an FNV-1a 64
 * checksum, then writes back a 16-byte ack (count, checksum; big-endian)
 * and prints "conn COUNT CHECKSUM".  With -w, each connection stays open
 * after the ack until HOLDFILE exists (at most 300 s).  Runs until killed.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

static const char *holdfile;

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static void *serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	uint8_t *buf = malloc(64 << 10), ack[16];
	uint64_t count = 0, sum = 0xcbf29ce484222325ull;
	if (!buf)
		t_die("tag-sink: out of memory");
	for (;;) {
		ssize_t n = read(fd, buf, 64 << 10);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "tag-sink: read: %s after %llu bytes\n", strerror(errno),
				(unsigned long long)count);
			goto out;
		}
		if (n == 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			sum = (sum ^ buf[i]) * 0x100000001b3ull;
		count += (uint64_t)n;
	}
	put64(ack, count);
	put64(ack + 8, sum);
	if (t_write_full(fd, ack, sizeof(ack)) < 0) {
		fprintf(stderr, "tag-sink: write ack: %s\n", strerror(errno));
		goto out;
	}
	printf("conn %llu %016llx\n", (unsigned long long)count, (unsigned long long)sum);
	fflush(stdout);
	if (holdfile) {
		struct stat st;
		for (int w = 0; w < 300 * 20 && stat(holdfile, &st) < 0; w++)
			usleep(50000);
	}
out:
	free(buf);
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	int opt;
	while ((opt = getopt(argc, argv, "w:")) != -1) {
		if (opt == 'w')
			holdfile = optarg;
		else
			goto usage;
	}
	if (optind != argc - 1)
		goto usage;
	signal(SIGPIPE, SIG_IGN);
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (lfd < 0)
		t_die("tag-sink: socket: %s", strerror(errno));
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[optind])),
				.sin_addr.s_addr = htonl(INADDR_ANY)};
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 1024) < 0)
		t_die("tag-sink: bind/listen: %s", strerror(errno));
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			t_die("tag-sink: accept: %s", strerror(errno));
		}
		pthread_t t;
		if (pthread_create(&t, NULL, serve, (void *)(intptr_t)fd))
			t_die("tag-sink: pthread_create failed");
		pthread_detach(t);
	}
usage:
	fprintf(stderr, "usage: tag-sink [-w HOLDFILE] PORT\n");
	return 2;
}
