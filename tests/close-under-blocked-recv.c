/*
 * close-under-blocked-recv - a thread blocked in recv on a socket that
 * another thread closes, while a new connection may take its place.
 *
 *   close-under-blocked-recv -s PORT       accepts two connections, writes
 *                                          "new!" on the second, then
 *                                          "old!" on the first, 300 ms later
 *   close-under-blocked-recv -c ADDR PORT  connection 1, a thread blocked in
 *                                          recv on it; close(1) from the main
 *                                          thread, connection 2 (on rshare it
 *                                          may get the first one's slot),
 *                                          read it, join
 *
 * The kernel keeps a socket while a call on it runs: the blocked recv gets
 * "old!", the new connection "new!".  Prints "blocked=... new=...".
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

static int c1;
static char got1[8] = "none";

static void *reader(void *arg)
{
	char b[4];
	ssize_t n = recv(c1, b, sizeof(b), MSG_WAITALL);
	(void)arg;
	if (n == 4)
		memcpy(got1, b, 4), got1[4] = 0;
	else
		snprintf(got1, sizeof(got1), n == 0 ? "eof" : "err%d", errno);
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	if (argc == 3 && !strcmp(argv[1], "-s")) {
		int one = 1, l = socket(AF_INET, SOCK_STREAM, 0), s1, s2;
		char b[16];
		a.sin_port = htons((uint16_t)atoi(argv[2]));
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0)
			t_die("listen: %s", strerror(errno));
		printf("ready\n");
		fflush(stdout);
		s1 = accept(l, NULL, NULL);
		s2 = accept(l, NULL, NULL);
		(void)!write(s2, "new!", 4);
		usleep(300000);
		(void)!write(s1, "old!", 4);
		while (read(s2, b, sizeof(b)) > 0)
			;
		return 0;
	}
	if (argc != 4 || strcmp(argv[1], "-c") || inet_pton(AF_INET, argv[2], &a.sin_addr) != 1)
		t_die("usage: close-under-blocked-recv -s PORT | -c ADDR PORT");
	a.sin_port = htons((uint16_t)atoi(argv[3]));
	{
		pthread_t t;
		char b2[8] = "none";
		int c2;
		c1 = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(c1, (struct sockaddr *)&a, sizeof(a)) < 0)
			t_die("connect: %s", strerror(errno));
		pthread_create(&t, NULL, reader, NULL);
		usleep(200000); /* the reader is blocked by now */
		close(c1);
		c2 = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(c2, (struct sockaddr *)&a, sizeof(a)) < 0)
			t_die("connect 2: %s", strerror(errno));
		if (recv(c2, b2, 4, MSG_WAITALL) == 4)
			b2[4] = 0;
		pthread_join(t, NULL);
		printf("blocked=%s new=%s\n", got1, b2);
		close(c2);
	}
	return 0;
}
