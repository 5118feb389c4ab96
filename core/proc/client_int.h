/*
 * client_int.h - what client.c (the hub connection) shares with
 * handover.c (fork, exec and the watch) and cell.c (requests through the
 * arena) inside the process side: the two locks, one request on a given
 * connection, mapping a pool, and the request cells.  Hidden:
 * nothing outside librshare.so sees these names.
 */
#ifndef RSHARE_CLIENT_INT_H
#define RSHARE_CLIENT_INT_H

#include <pthread.h>

#include "client.h"

#define CL_HIDDEN __attribute__((visibility("hidden")))

/* rpc: one request at a time on the connections; attach: attaching, and fork */
extern pthread_mutex_t cl_rpc_lock CL_HIDDEN, cl_attach_lock CL_HIDDEN;
/* A request on FD (with SENDFD passed along when >= 0), and unless R is
 * NULL its reply, whose descriptors go to FDS (at most NFDS, -1 where none
 * came); 0 or -ECONNRESET. */
int cl_rpc_on(int fd, struct msg_req *q, struct msg_rep *r, int sendfd, int *fds, int nfds) CL_HIDDEN;
/* The arena and pool eventfd of a HELLO (or EXECED) reply, FDS[0] and
 * FDS[1] (both taken), as this process's pool K; 0 or -errno. */
int cl_map_pool(uint32_t k, const struct msg_rep *rp, int *fds) CL_HIDDEN;
/* cell.c: whether OP may go through a request cell; Q through pool K's
 * cell (reply into R, none awaited when R is NULL): 0, -ECONNRESET, or
 * -ENOSYS when this process has no cell there; every cell's request taken
 * by the hub (before a request over a connection); a forked child's
 * cells, its parent's, forgotten */
int cl_cell_op(uint32_t op) CL_HIDDEN;
int cl_cell_rpc(uint32_t k, const struct msg_req *q, struct msg_rep *r) CL_HIDDEN;
void cl_cells_quiet(void) CL_HIDDEN;
void cl_cells_forget(void) CL_HIDDEN;
/* this process's cell in pool K, asked for the first time; NULL: none */
struct arena_cell *cl_cell(uint32_t k) CL_HIDDEN;

#endif
