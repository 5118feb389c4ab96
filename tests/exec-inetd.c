/*
 * exec-inetd [-n|-u] PORT PROGRAM [ARG...]
 *
 * An inetd in miniature: listens on 0.0.0.0:PORT (close-on-exec), prints
 * "ready", accepts one connection, puts it on descriptors 0 and 1 (without
 * close-on-exec, as inetd does) and execs PROGRAM, which talks to the
 * client through its standard input and output (cat is an echo server).
 * With -n, LD_PRELOAD is set empty first, so PROGRAM runs without rshare;
 * with -u it is removed (as a program that builds its child's environment
 * leaves it out).  Plain BSD sockets: it knows nothing of rshare.
 * Exit 1 when a call fails; otherwise PROGRAM's status.
 */
#include "helpers.h"

#include <netinet/in.h>
#include <sys/socket.h>

int main(int argc, char **argv)
{
	int bare = 0, ls, c, one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET};
	if (argc > 1 && (!strcmp(argv[1], "-n") || !strcmp(argv[1], "-u"))) {
		bare = argv[1][1];
		argv++;
		argc--;
	}
	if (argc < 3) {
		fprintf(stderr, "usage: exec-inetd [-n|-u] PORT PROGRAM [ARG...]\n");
		return 2;
	}
	a.sin_port = htons((uint16_t)atoi(argv[1]));
	ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 4) < 0) {
		perror("exec-inetd: listen");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	c = accept(ls, NULL, NULL);
	if (c < 0 || dup2(c, 0) < 0 || dup2(c, 1) < 0) {
		perror("exec-inetd: accept");
		return 1;
	}
	close(c);
	if (bare == 'n')
		setenv("LD_PRELOAD", "", 1);
	else if (bare == 'u')
		unsetenv("LD_PRELOAD");
	execvp(argv[2], argv + 2);
	perror("exec-inetd: exec");
	return 1;
}
