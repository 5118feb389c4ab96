/*
 * addr.c - comparing and rewriting socket addresses (addr.h).
 */
#include "addr.h"

#include <string.h>

int addr_same_ip(const union sockaddr_any *a, const union sockaddr_any *b)
{
	if (a->sa.sa_family != b->sa.sa_family)
		return 0;
	if (a->sa.sa_family == AF_INET)
		return a->in.sin_addr.s_addr == b->in.sin_addr.s_addr;
	return !memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, 16);
}

int addr_is_any(const union sockaddr_any *a)
{
	if (a->sa.sa_family == AF_INET)
		return a->in.sin_addr.s_addr == 0;
	if (a->sa.sa_family == AF_INET6) {
		static const struct in6_addr any = IN6ADDR_ANY_INIT;
		return !memcmp(&a->in6.sin6_addr, &any, 16);
	}
	return 1;
}

uint16_t addr_port(const union sockaddr_any *a)
{
	return ntohs(a->sa.sa_family == AF_INET6 ? a->in6.sin6_port : a->in.sin_port);
}

void addr_set_port(union sockaddr_any *a, uint16_t port)
{
	if (a->sa.sa_family == AF_INET6)
		a->in6.sin6_port = htons(port);
	else
		a->in.sin_port = htons(port);
}
