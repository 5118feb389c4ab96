/*
 * fdopen-client HOST PORT
 *
 * A client that talks through stdio: fdopen(fd, "r+") on its connection to
 * an echo server, three lines with fprintf and a 100000-byte one with
 * fputc, fflush, each read back with fgets; fileno() of the stream gives
 * shutdown(SHUT_WR) its descriptor, and the next fgets sees EOF; fclose.
 * Prints what it read and how each call ended.  Plain BSD sockets and
 * stdio: it knows nothing of rshare.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

int main(int argc, char **argv)
{
	static char line[200000];
	struct sockaddr_in a = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	FILE *f;
	if (argc != 3 || inet_pton(AF_INET, argv[1], &a.sin_addr) != 1)
		t_die("usage: fdopen-client HOST PORT");
	a.sin_port = htons((uint16_t)atoi(argv[2]));
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		t_die("fdopen-client: connect: %s", strerror(errno));
	f = fdopen(fd, "r+");
	if (!f)
		t_die("fdopen-client: fdopen: %s", strerror(errno));
	printf("fileno %s\n", fileno(f) == fd ? "is the descriptor" : "differs");
	for (int i = 1; i <= 3; i++)
		fprintf(f, "line %d\n", i);
	for (int i = 0; i < 100000; i++)
		fputc('x', f);
	fputc('\n', f);
	printf("fflush %d\n", fflush(f));
	for (int i = 0; i < 4; i++) {
		if (!fgets(line, sizeof(line), f)) {
			printf("fgets: %s\n", feof(f) ? "EOF" : strerror(errno));
			return 1;
		}
		if (strlen(line) > 100)
			printf("read %zu bytes\n", strlen(line));
		else
			printf("read %s", line);
	}
	printf("shutdown %d\n", shutdown(fileno(f), SHUT_WR));
	printf("then fgets: %s\n", fgets(line, sizeof(line), f) ? line : feof(f) ? "EOF" : strerror(errno));
	printf("fclose %d\n", fclose(f));
	return 0;
}
