/*
 * xqueue.h - the growable circular queues the transports keep (posted
 * receives, writes that wait for their completion, the pieces of a soft
 * link's outgoing stream): entries of one size, N of them from HEAD, in
 * CAP places; the next goes at (HEAD + N) % CAP.
 */
#ifndef RSHARE_XQUEUE_H
#define RSHARE_XQUEUE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Room for MORE entries beyond the N of queue A: A itself when there is,
 * else the queue unrolled from place 0 into a new array twice as large
 * (FIRST places for a queue that has none) until they fit, A freed and
 * *HEAD and *CAP set; NULL when out of memory, with nothing changed. */
static inline void *xq_room(void *a, uint32_t *head, uint32_t n, uint32_t *cap, uint32_t more, size_t size,
			    uint32_t first)
{
	uint32_t c = *cap ? *cap : first;
	uint8_t *na;
	while (c - n < more)
		c *= 2;
	if (c == *cap)
		return a;
	if (!(na = malloc((size_t)c * size)))
		return NULL;
	for (uint32_t i = 0; i < n; i++)
		memcpy(na + (size_t)i * size, (uint8_t *)a + (size_t)((*head + i) % *cap) * size, size);
	free(a);
	*head = 0;
	*cap = c;
	return na;
}

#endif
