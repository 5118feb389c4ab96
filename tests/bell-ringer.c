/*
 * bell-ringer: a process that rings its doorbell for ever, with nothing
 * for the hub to do: it attaches, makes a listening socket (a slot of its
 * own) and sets that slot's bell and the hub's kick in a tight loop.  A
 * misbehaving process of this kind must not keep the hub from anyone
 * else (tests/hub-serves-others-while-one-process-rings.bats).
 *
 * usage: bell-ringer PORT   prints "ringing" once it rings; runs until killed
 */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"

int main(int argc, char **argv)
{
	union sockaddr_any a;
	uint32_t slot, gen;
	int evfd = -1;
	if (argc != 2)
		return 2;
	memset(&a, 0, sizeof(a));
	a.in.sin_family = AF_INET;
	a.in.sin_port = htons((uint16_t)atoi(argv[1]));
	if (cl_attach() < 0 || vs_listen(&a, 1, 0, 0, -1, &evfd, &slot, &gen) < 0) {
		fprintf(stderr, "bell-ringer: no hub or no listener\n");
		return 1;
	}
	printf("ringing\n");
	fflush(stdout);
	for (;;) {
		arena_ring(cl.p[0].arena, slot, SLOTOP_CREDIT | SLOTOP_POLL);
		cl_kick(0);
	}
}
