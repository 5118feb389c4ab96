/*
 * diff-stream-gen.h - the programs of diff-stream (tests/diff-stream.c),
 * generated from a seed: a few connections, each a list of steps and an
 * end, all drawn from one stream of the seed; with -X, the calls each
 * step reads and writes with from a second, the intr steps that
 * become jump from a third, and the connections the server accepts as an
 * event loop does (accept4 with SOCK_NONBLOCK) from a fourth, so that a
 * seed's program stays what it was when a draw is added.  print_prog shows one (diff-stream -p).
 */
#ifndef DIFF_STREAM_GEN_H
#define DIFF_STREAM_GEN_H

#include <stdint.h>
#include <stdio.h>

#include "diff-stream-calls.h"
#include "helpers.h"

#define MAX_CONNS 4
#define MAX_STEPS 10

enum { ST_DATA, ST_BOTH, ST_INTR, ST_TIMEO, ST_JUMP };
enum { END_FIN, END_UNREAD, END_LINGER0 };
static const char *const st_name[] = {"data", "both", "intr", "timeo", "jump"};
static const char *const end_name[] = {"fin", "unread", "linger0"};

struct step {
	int kind, from;  /* from: 0 client, 1 server (the writer, or the reader for intr) */
	uint32_t n, chunk;
	int rmode, wnonblock;
	int xr, xw; /* -X */
};

struct conn {
	int nsteps, end, end_from, nb_connect;
	int nb_accept; /* -X: accept4(SOCK_NONBLOCK), then fcntl back to blocking */
	uint32_t end_n;
	struct step st[MAX_STEPS];
};

struct prog {
	int nconns;
	struct conn c[MAX_CONNS];
};

static uint64_t rnd(uint64_t *s, uint64_t n) { return t_splitmix(s) % n; }

/* sizes from 1 B to 4 MiB, small ones as likely as large ones */
static uint32_t rnd_size(uint64_t *s, uint32_t max)
{
	uint32_t bits = (uint32_t)rnd(s, 23), v = (uint32_t)(t_splitmix(s) & ((1u << bits) - 1)) + 1;
	return v > max ? max : v;
}

static void gen_step(uint64_t *s, struct step *st, int first, int speak_first)
{
	uint64_t k = rnd(s, 10);
	st->kind = k < 6 ? ST_DATA : k < 8 ? ST_BOTH : ST_INTR;
	st->from = first && speak_first ? 1 : (int)rnd(s, 2);
	if (first && speak_first)
		st->kind = ST_DATA;
	/* both sides write before reading: keep it within what kernel TCP
	 * buffers without a reader (and what the rings hold today) */
	st->n = st->kind == ST_BOTH ? rnd_size(s, 96 << 10) : rnd_size(s, 4u << 20);
	st->chunk = rnd_size(s, st->n);
	if (st->chunk < st->n / 512) /* at most 512 writes a step */
		st->chunk = st->n / 512;
	st->rmode = (int)rnd(s, RD_NMODES);
	st->wnonblock = (int)rnd(s, 2);
}

static int extended; /* -X */

/* -X: the extra calls, from a stream of their own */
static void gen_x(uint64_t seed, struct prog *p)
{
	uint64_t s = seed * 0xd1b54a32d192ed03ull + 7;
	for (int i = 0; i < p->nconns; i++)
		for (int j = 0; j < p->c[i].nsteps; j++) {
			struct step *st = &p->c[i].st[j];
			if (st->kind == ST_INTR && rnd(&s, 2))
				st->kind = ST_TIMEO;
			st->xr = (int)rnd(&s, XR_N);
			st->xw = (int)rnd(&s, XW_N);
			/* an edge-triggered set is its own way to wait; WAITALL blocks */
			if (st->xr == XR_EPOLLET)
				st->rmode = RD_EPOLL;
			if (st->xr == XR_WAITALL)
				st->rmode = RD_BLOCK;
		}
	/* a stream of its own, so that the draws above stay as they were */
	s = seed * 0x94d049bb133111ebull + 3;
	for (int i = 0; i < p->nconns; i++)
		for (int j = 0; j < p->c[i].nsteps; j++)
			if (p->c[i].st[j].kind == ST_INTR && rnd(&s, 2))
				p->c[i].st[j].kind = ST_JUMP;
	s = seed * 0xbf58476d1ce4e5b9ull + 5;
	for (int i = 0; i < p->nconns; i++)
		p->c[i].nb_accept = (int)rnd(&s, 2);
}

static void gen(uint64_t seed, struct prog *p)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	p->nconns = 1 + (int)rnd(&s, MAX_CONNS);
	for (int i = 0; i < p->nconns; i++) {
		struct conn *c = &p->c[i];
		int speak_first = rnd(&s, 3) == 0;
		c->nsteps = 1 + (int)rnd(&s, MAX_STEPS - 1);
		for (int j = 0; j < c->nsteps; j++)
			gen_step(&s, &c->st[j], j == 0, speak_first);
		c->end = (int)rnd(&s, 3);
		c->end_from = (int)rnd(&s, 2);
		c->end_n = rnd_size(&s, 16 << 10); /* unread: within the first window */
		c->nb_connect = (int)rnd(&s, 2);
	}
	if (extended)
		gen_x(seed, p);
}

static void print_prog(const struct prog *p)
{
	for (int i = 0; i < p->nconns; i++) {
		const struct conn *c = &p->c[i];
		printf("c%d connect %s\n", i, c->nb_connect ? "nonblocking" : "blocking");
		if (extended)
			printf("c%d accept %s\n", i, c->nb_accept ? "nonblocking" : "blocking");
		for (int j = 0; j < c->nsteps; j++) {
			const struct step *st = &c->st[j];
			printf("c%d %02d %s from %s n=%u chunk=%u %s %s", i, j, st_name[st->kind],
			       st->from ? "server" : "client", st->n, st->chunk, rd_name[st->rmode],
			       st->wnonblock ? "nbwrite" : "write");
			if (extended)
				printf(" by %s/%s", xr_name[st->xr], xw_name[st->xw]);
			printf("\n");
		}
		printf("c%d end %s by %s n=%u\n", i, end_name[c->end], c->end_from ? "server" : "client", c->end_n);
	}
}

#endif
