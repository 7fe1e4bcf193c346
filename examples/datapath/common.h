/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * common.h -- what the C data-path examples share, on top of the connection
 * examples' C helpers (arguments, bounded waits on librpma's fds): the peer,
 * connecting with retries, accepting with the server's region descriptor as
 * private data, closing, and waiting for one completion, each bounded by
 * 10 s. Every helper prints what went wrong itself ("WHO: STEP failed: ...")
 * and returns 0 or -1.
 */

#ifndef DATAPATH_EXAMPLE_COMMON_H
#define DATAPATH_EXAMPLE_COMMON_H

#include "../connection/c/common.h"

#include <librpma.h>

#include <stddef.h>

/* Prints why `step` failed (ret: an RPMA_E_* value or EXAMPLE_TIMED_OUT);
 * returns -1. */
int dp_fail(const char* who, const char* step, int ret);

/* The peer for addr (local: the server's address, else the client's way to
 * it). */
int dp_peer_new(const char* who, const char* addr, int local, struct rpma_peer** peer_ptr);

/* Client: connects to addr:port (the connection shaped by cfg, NULL:
 * defaults), retrying for up to 5 s while the server is
 * not listening yet, and waits for ESTABLISHED. */
int dp_connect(const char* who, struct rpma_peer* peer, const char* addr, const char* port,
               const struct rpma_conn_cfg* cfg, struct rpma_conn** conn_ptr);

/* Client: the server's region, decoded from the accept's private data
 * (librpma's 21-byte descriptor). */
int dp_server_region(const char* who, struct rpma_conn* conn, struct rpma_mr_remote** remote_ptr);

/* Server: listens on addr:port and says so (or why not). */
int dp_listen(const char* who, struct rpma_peer* peer, const char* addr, const char* port,
              struct rpma_ep** ep_ptr);

/* Server: the next request (its connection shaped by cfg, NULL: defaults),
 * waiting up to 10 s. */
int dp_next_req(const char* who, struct rpma_ep* ep, const struct rpma_conn_cfg* cfg,
                struct rpma_conn_req** req_ptr);

/* Server: accepts *req_ptr (consumed) with [pdata, +len) as the accept's
 * private data (pdata NULL: none) and waits for ESTABLISHED. */
int dp_accept(const char* who, struct rpma_conn_req** req_ptr, const void* pdata, size_t len,
              struct rpma_conn** conn_ptr);

/* Waits for the other side ("client" or "server") to disconnect, closes
 * and deletes *conn_ptr. */
int dp_wait_closed(const char* who, const char* other, struct rpma_conn** conn_ptr);

/* Disconnects, waits for CLOSED and deletes *conn_ptr. */
int dp_disconnect(const char* who, struct rpma_conn** conn_ptr);

/* Waits up to 10 s for the next completion of cq: its fd (rpma_cq_get_fd) is
 * made non-blocking and polled between rpma_cq_get_wc / rpma_cq_wait calls.
 * A completion with an error status counts as failure of `what`. */
int dp_wait_wc(const char* who, const char* what, struct rpma_cq* cq, struct ibv_wc* wc);

#endif /* DATAPATH_EXAMPLE_COMMON_H */
