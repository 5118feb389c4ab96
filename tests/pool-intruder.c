/*
 * pool-intruder: tries to join another process's pool, which only a child
 * forked by that process may do (MSG_FORK with the pool's token, from the
 * parent's pid and uid).
 *
 * usage: pool-intruder owner          attach (new pool), print "token T pid P", wait for stdin EOF
 *        pool-intruder guess          MSG_FORK with a made-up token
 *        pool-intruder steal T        MSG_FORK with the owner's real token, from another process
 *        pool-intruder steal-as U T   the same after setuid(U)
 * prints the hub's answer: "status N" (0, or -errno); exit 0 when it ran.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"

static int ask_fork(uint64_t token)
{
	struct msg_req q = {.op = MSG_FORK, .token = token, .pid = getpid()};
	struct msg_rep r;
	int fd = cl_hub_connect();
	if (fd < 0) {
		perror("pool-intruder: hub");
		return 1;
	}
	if (send(fd, &q, sizeof(q), 0) != sizeof(q) || recv(fd, &r, sizeof(r), 0) != sizeof(r)) {
		printf("status closed\n");
		return 0;
	}
	printf("status %d\n", r.status);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "owner")) {
		char b[16];
		if (cl_attach() < 0) {
			fprintf(stderr, "pool-intruder: no hub\n");
			return 1;
		}
		printf("token %" PRIu64 " pid %d\n", cl.p[0].token, (int)getpid());
		fflush(stdout);
		while (read(0, b, sizeof(b)) > 0)
			;
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "guess"))
		return ask_fork(0x1234567890abcdefull);
	if (argc == 3 && !strcmp(argv[1], "steal"))
		return ask_fork(strtoull(argv[2], NULL, 10));
	if (argc == 4 && !strcmp(argv[1], "steal-as")) {
		if (setuid((uid_t)atoi(argv[2])) < 0) {
			perror("pool-intruder: setuid");
			return 1;
		}
		return ask_fork(strtoull(argv[3], NULL, 10));
	}
	fprintf(stderr, "usage: pool-intruder owner | guess | steal TOKEN | steal-as UID TOKEN\n");
	return 2;
}
