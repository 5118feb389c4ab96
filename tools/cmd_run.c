/*
 * cmd_run.c - rshare run: the options become RSHARE_* variables, the hub
 * is started when none answers, and the command is run with librshare.so
 * first in LD_PRELOAD (or on kernel TCP when the configuration is bad).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "cmd.h"

int cmd_run(int argc, char **argv)
{
	char lib[PATH_MAX], hubbuf[PATH_MAX], *pre;
	const char *old = getenv("LD_PRELOAD");
	struct cfg c;
	int i, use = 1, fd;
	for (i = 0; i < argc; i++) {
		int handled, r;
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		}
		if (argv[i][0] != '-')
			break;
		if ((r = common_opt(argc, argv, &i, &handled, USAGE_RUN)))
			return r;
		if (!handled)
			return bad_arg("unknown option \"%s\" of run, try \"rshare help\"", argv[i]);
	}
	if (i >= argc)
		return bad_usage(USAGE_RUN);
	if (load_config(&c) < 0)
		use = 0; /* said once; the command runs on kernel TCP */
	if (use) {
		if (find_lib(lib, sizeof(lib)) < 0) {
			fprintf(stderr, "rshare: cannot find librshare.so next to this rshare\n");
			return 1;
		}
		export_config(&c);
		if ((fd = cl_hub_connect()) >= 0)
			close(fd);
		else if (!getenv("RSHARE_NO_AUTOSTART"))
			hub_spawn(find_hub(&c, hubbuf, sizeof(hubbuf)), c.port, 0, 1);
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
	}
	execvp(argv[i], argv + i);
	fprintf(stderr, "rshare: %s: %s\n", argv[i], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
