/*
 * connect-refused HOST PORT
 *
 * A blocking connect() to a port where nothing listens must fail with
 * ECONNREFUSED.  Exit 0 when it does, 1 otherwise.
 */
#include "helpers.h"

#include <netdb.h>
#include <sys/socket.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: connect-refused HOST PORT\n");
		return 2;
	}
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
	if (getaddrinfo(argv[1], argv[2], &hints, &ai))
		t_die("connect-refused: bad address");
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		t_die("connect-refused: socket: %s", strerror(errno));
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		t_die("connect-refused: connect succeeded");
	if (errno != ECONNREFUSED)
		t_die("connect-refused: connect: %s, want ECONNREFUSED", strerror(errno));
	/* the socket is not connected afterwards */
	char c;
	if (send(fd, &c, 1, MSG_NOSIGNAL) != -1)
		t_die("connect-refused: send on the refused socket succeeded");
	printf("connect: ECONNREFUSED\n");
	close(fd);
	return 0;
}
