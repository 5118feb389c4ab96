/*
 * passthrough N: N rounds of write, read, send, recv and poll on a unix
 * socketpair (descriptors that are not rshare sockets), one byte each.
 * passthrough-cost.sh runs it under callgrind with and without the library
 * preloaded: the difference per call is what the interposer costs a
 * program's other descriptors.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 0;
	int sv[2];
	char c = 'x';
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 1;
	for (long i = 0; i < n; i++) {
		struct pollfd p = {.fd = sv[1], .events = POLLIN};
		if (write(sv[0], &c, 1) != 1 || read(sv[1], &c, 1) != 1 ||
		    send(sv[0], &c, 1, 0) != 1 || poll(&p, 1, 0) != 1 || recv(sv[1], &c, 1, 0) != 1)
			return 1;
	}
	return 0;
}
