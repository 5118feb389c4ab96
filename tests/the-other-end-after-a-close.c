/*
 * the-other-end-after-a-close [N]
 *
 * What one process finds at the other end of a connection to its own
 * listener on 127.0.0.1 the moment it closed, shut down or reset one end:
 * N times each (default 500), a nonblocking recv (no poll before it, which
 * would wait for nothing but could order things), and once more, as a
 * separate round, a poll of timeout 0 and then the recv.  On loopback
 * every such look sees the end of stream (or the reset) at once: prints
 * one line a case of what the N looks found, counted, e.g.
 *   close recv: eof 500
 *   linger0 recv: ECONNRESET 500
 * so that kernel TCP's transcript and another transport's can be compared.
 */
#include "helpers.h"

#include <poll.h>

enum how { H_CLOSE, H_SHUT, H_RESET, H_N };
static const char *how_name[H_N] = {"close", "shutdown(SHUT_WR)", "linger0"};

/* what a nonblocking recv of fd found: "eof", "data" or the errno's name */
static const char *look(int fd)
{
	char b[16];
	ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
	if (n == 0)
		return "eof";
	if (n > 0)
		return "data";
	return errno == EAGAIN ? "EAGAIN" : errno == ECONNRESET ? "ECONNRESET" : "other";
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 500;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 8) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0) {
		perror("listener");
		return 1;
	}
	for (int polled = 0; polled < 2; polled++) {
		for (int h = 0; h < H_N; h++) {
			const char *seen[4] = {0};
			int count[4] = {0}, kinds = 0, pollin = 0;
			for (int i = 0; i < n; i++) {
				int c = socket(AF_INET, SOCK_STREAM, 0), s, k;
				const char *r;
				if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) < 0 || (s = accept(l, NULL, NULL)) < 0) {
					perror("connect");
					return 1;
				}
				if (h == H_SHUT) {
					shutdown(c, SHUT_WR);
				} else {
					if (h == H_RESET)
						setsockopt(c, SOL_SOCKET, SO_LINGER, &(struct linger){1, 0}, sizeof(struct linger));
					close(c);
				}
				if (polled) {
					struct pollfd p = {.fd = s, .events = POLLIN};
					pollin += poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
				}
				r = look(s);
				for (k = 0; k < kinds && strcmp(seen[k], r); k++)
					;
				if (k == kinds && kinds < 4)
					seen[kinds++] = r;
				if (k < 4)
					count[k]++;
				close(s);
				if (h == H_SHUT)
					close(c);
			}
			printf("%s%s recv:", how_name[h], polled ? ", poll(0) first," : "");
			for (int k = 0; k < kinds; k++)
				printf(" %s %d", seen[k], count[k]);
			if (polled)
				printf("; POLLIN %d", pollin);
			printf("\n");
		}
	}
	return 0;
}
