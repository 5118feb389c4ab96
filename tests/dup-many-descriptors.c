/*
 * dup-many-descriptors -n DUPS ADDR PORT
 *
 * Connects to an echo server, makes DUPS more descriptors of the socket
 * (dup, and fcntl F_DUPFD from a thread of its own at the same time),
 * closes all but the last, and echoes one message through it: the socket
 * lives as long as one descriptor does, however many there were.  Then
 * two descriptors of the socket go into one epoll set.  Prints
 *   echo=ok|ERRNO epoll-second=0|ERRNO
 * the same on kernel TCP and on rshare.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#define MAXD 4096
static int fds[MAXD], fds2[MAXD], ndup, sock;

static void *dupper(void *arg)
{
	(void)arg;
	for (int i = 0; i < ndup / 2; i++)
		fds2[i] = fcntl(sock, F_DUPFD, 3);
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	char msg[8] = "dup-echo", back[8];
	struct epoll_event ev = {.events = EPOLLIN};
	pthread_t t;
	int opt, last, ep, r2, got = 0;
	while ((opt = getopt(argc, argv, "n:")) != -1)
		if (opt == 'n')
			ndup = atoi(optarg);
	if (optind + 2 != argc || ndup < 2 || ndup > MAXD || inet_pton(AF_INET, argv[optind], &a.sin_addr) != 1)
		t_die("usage: dup-many-descriptors -n DUPS ADDR PORT");
	a.sin_port = htons((uint16_t)atoi(argv[optind + 1]));
	sock = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(sock, (struct sockaddr *)&a, sizeof(a)) < 0)
		t_die("connect: %s", strerror(errno));
	pthread_create(&t, NULL, dupper, NULL);
	for (int i = 0; i < ndup - ndup / 2; i++)
		fds[i] = dup(sock);
	pthread_join(t, NULL);
	last = dup(sock);
	close(sock);
	for (int i = 0; i < ndup - ndup / 2; i++)
		close(fds[i]);
	for (int i = 0; i < ndup / 2; i++)
		close(fds2[i]);
	if (t_write_full(last, msg, sizeof(msg)) < 0) {
		printf("echo=%s", strerror(errno));
	} else {
		while (got < (int)sizeof(back)) {
			ssize_t n = read(last, back + got, sizeof(back) - (size_t)got);
			if (n <= 0)
				break;
			got += (int)n;
		}
		printf("echo=%s", got == sizeof(back) && !memcmp(msg, back, sizeof(back)) ? "ok" : "lost");
	}
	sock = dup(last);
	ep = epoll_create1(0);
	epoll_ctl(ep, EPOLL_CTL_ADD, last, &ev);
	r2 = epoll_ctl(ep, EPOLL_CTL_ADD, sock, &ev);
	printf(" epoll-second=%s\n", r2 == 0 ? "0" : errno == EEXIST ? "EEXIST" : "EOTHER");
	return 0;
}
