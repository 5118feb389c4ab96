/*
 * rshare - the command: run a program under rshare, show the hub's state.
 * See rshare(1).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "msg.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: rshare run [--] COMMAND [ARG...]\n"
		   "       rshare stat [--json]\n"
		   "       rshare version\n");
}

static int find_lib(char *buf, size_t len)
{
	char exe[PATH_MAX - 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	const char *cands[] = {"/librshare.so", "/../lib/rshare/librshare.so"};
	char *slash;
	if (n <= 0)
		return -1;
	exe[n] = 0;
	slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = 0;
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
		if (strlen(exe) + strlen(cands[i]) + 1 > len)
			return -1;
		strcpy(buf, exe);
		strcat(buf, cands[i]);
		if (access(buf, R_OK) == 0) {
			char *r = realpath(buf, NULL);
			if (r) {
				snprintf(buf, len, "%s", r);
				free(r);
			}
			return 0;
		}
	}
	return -1;
}

static int cmd_run(int argc, char **argv)
{
	char lib[PATH_MAX], *pre;
	const char *old = getenv("LD_PRELOAD");
	int i = 0;
	if (i < argc && !strcmp(argv[i], "--"))
		i++;
	if (i >= argc) {
		usage(stderr);
		return 2;
	}
	if (find_lib(lib, sizeof(lib)) < 0) {
		fprintf(stderr, "rshare: cannot find librshare.so\n");
		return 1;
	}
	if (old && *old) {
		size_t n = strlen(lib) + strlen(old) + 2;
		pre = malloc(n);
		if (!pre)
			return 1;
		snprintf(pre, n, "%s:%s", lib, old);
	} else {
		pre = lib;
	}
	setenv("LD_PRELOAD", pre, 1);
	execvp(argv[i], argv + i);
	fprintf(stderr, "rshare: cannot run %s: %s\n", argv[i], strerror(errno));
	return 127;
}

static int cmd_stat(int argc, char **argv)
{
	struct msg_req q = {.op = MSG_STAT};
	char buf[65536];
	ssize_t n;
	int fd;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--json") || !strcmp(argv[i], "-j"))
			q.arg = 1;
		else {
			usage(stderr);
			return 2;
		}
	}
	fd = cl_hub_connect();
	if (fd < 0) {
		fprintf(stderr, "rshare: no hub runs in this network namespace\n");
		return 1;
	}
	if (send(fd, &q, sizeof(q), MSG_NOSIGNAL) != sizeof(q)) {
		fprintf(stderr, "rshare: hub: %s\n", strerror(errno));
		return 1;
	}
	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
		if (fwrite(buf, 1, n, stdout) != (size_t)n)
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 2, argv + 2);
	if (!strcmp(argv[1], "stat"))
		return cmd_stat(argc - 2, argv + 2);
	if (!strcmp(argv[1], "version")) {
		printf("rshare 0.1\n");
		return 0;
	}
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "rshare: unknown command \"%s\"\n", argv[1]);
	usage(stderr);
	return 2;
}
