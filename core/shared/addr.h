/*
 * addr.h - socket addresses as both sides of rshare hold them.
 *
 * One union carries an IPv4 or IPv6 address with its port; the helpers
 * compare, test and rewrite it without caring which family it is.  The
 * arena, the hub's requests and the wire frames all store this union.
 */
#ifndef RSHARE_ADDR_H
#define RSHARE_ADDR_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

union sockaddr_any {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};

/* Same family and the same address (ports aside): 1 or 0. */
int addr_same_ip(const union sockaddr_any *a, const union sockaddr_any *b);
/* The wildcard address of its family (or no family at all): 1 or 0. */
int addr_is_any(const union sockaddr_any *a);
/* The port, in host order. */
uint16_t addr_port(const union sockaddr_any *a);
void addr_set_port(union sockaddr_any *a, uint16_t port);

#endif
