/*
 * halfclose-server PORT
 *
 * Prints "ready"; for each connection in turn: reads to EOF counting
 * bytes, then (its peer has shut down only its sending side) still sends
 * the reply "got N\n", and closes.  Runs until killed.
 */
#include "helpers.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: halfclose-server PORT\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])),
				.sin_addr.s_addr = htonl(INADDR_ANY)};
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 16) < 0)
		t_die("halfclose-server: %s", strerror(errno));
	printf("ready\n");
	fflush(stdout);
	static uint8_t buf[65536];
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			t_die("halfclose-server: accept: %s", strerror(errno));
		}
		uint64_t count = 0;
		ssize_t n;
		while ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
			if (n > 0)
				count += (uint64_t)n;
		if (n < 0) {
			fprintf(stderr, "halfclose-server: read: %s\n", strerror(errno));
			close(fd);
			continue;
		}
		char reply[64];
		int len = snprintf(reply, sizeof(reply), "got %llu\n", (unsigned long long)count);
		if (t_write_full(fd, reply, (size_t)len) < 0)
			fprintf(stderr, "halfclose-server: reply after EOF: %s\n", strerror(errno));
		else
			printf("replied %llu\n", (unsigned long long)count);
		fflush(stdout);
		close(fd);
	}
}
