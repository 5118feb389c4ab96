/*
 * fork-child: a preloaded parent that attached to its hub (by listening)
 * forks a child that never touches a socket.  Prints "parent PID" and
 * "child PID", then "ready".  The child waits for FILE.child to exist, or
 * dies by SIGKILL from the test; the parent reaps it, prints "reaped", and
 * waits for FILE.parent before it exits.
 *
 * usage: fork-child PORT FILE
 */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void wait_for(const char *f)
{
	for (int i = 0; i < 600 && access(f, F_OK) != 0; i++)
		usleep(100000);
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	char cf[512], pf[512];
	int one = 1, fd;
	pid_t pid;
	if (argc != 3)
		return 2;
	snprintf(cf, sizeof(cf), "%s.child", argv[2]);
	snprintf(pf, sizeof(pf), "%s.parent", argv[2]);
	a.sin_port = htons((unsigned short)atoi(argv[1]));
	fd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 4) < 0) {
		perror("fork-child: listen");
		return 1;
	}
	printf("parent %d\n", (int)getpid());
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		printf("child %d\n", (int)getpid());
		printf("ready\n");
		fflush(stdout);
		wait_for(cf);
		_exit(0);
	}
	waitpid(pid, NULL, 0);
	printf("reaped\n");
	fflush(stdout);
	wait_for(pf);
	close(fd);
	return 0;
}
