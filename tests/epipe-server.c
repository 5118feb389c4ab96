/*
 * epipe-server PORT
 *
 * Prints "ready"; accepts connections and closes each one at once, without
 * reading.  Runs until killed.
 */
#include "helpers.h"

#include <netinet/in.h>
#include <sys/socket.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: epipe-server PORT\n");
		return 2;
	}
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])),
				.sin_addr.s_addr = htonl(INADDR_ANY)};
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 16) < 0)
		t_die("epipe-server: %s", strerror(errno));
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd >= 0) {
			close(fd);
			printf("closed\n");
			fflush(stdout);
		} else if (errno != EINTR && errno != ECONNABORTED) {
			t_die("epipe-server: accept: %s", strerror(errno));
		}
	}
}
