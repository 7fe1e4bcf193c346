/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * common.h -- what the C connection examples share: the greetings, argument
 * parsing, and bounded waits on the non-blocking fds of librpma's objects.
 */

#ifndef CONNECTION_EXAMPLE_COMMON_H
#define CONNECTION_EXAMPLE_COMMON_H

#include <librpma.h>

/* rdma_cm carries at most 56 bytes of private data with a connect request. */
#define CLIENT_HELLO "hello from client"
#define SERVER_HELLO "hello from server"
/* How long any side waits to hear from the other before giving up: 10 s, or
 * $EXAMPLE_QUIET_MS (test/fault/run.sh shortens it: there one side fails on
 * purpose and the other's wait for it is dead time). */
#define QUIET_LIMIT_MS quiet_limit_ms()
/* How long a client keeps retrying while the server is not listening yet:
 * 5 s, or the quiet limit when that is shorter. */
#define RETRY_LIMIT_MS (QUIET_LIMIT_MS < 5000 ? QUIET_LIMIT_MS : 5000)
#define RETRY_PAUSE_MS 200

/* Returned (positive, unlike RPMA_E_*) when a wait ran past its limit. */
#define EXAMPLE_TIMED_OUT 1

/* <addr> <port> [--count N] (the count only when count_ptr is not NULL). */
int parse_args(int argc, char* argv[], const char** addr, const char** port, int* count_ptr);

/* QUIET_LIMIT_MS: $EXAMPLE_QUIET_MS when it is a positive number, else 10000. */
int quiet_limit_ms(void);

/* Milliseconds on the monotonic clock. */
long long now_ms(void);

/* Sets O_NONBLOCK (the CQ's fd: rpma_cq_wait then returns RPMA_E_NO_COMPLETION
 * instead of blocking). 0, or -1 with errno set. */
int set_nonblock(int fd);

/* Waits until fd is readable or the deadline (now_ms() scale) passes:
 * 0, EXAMPLE_TIMED_OUT, or -1 with errno set. */
int wait_readable(int fd, long long deadline_ms);

/* The next incoming request, waiting up to timeout_ms: the endpoint's fd
 * (rpma_ep_get_fd) is polled, then the request read. The fd stays blocking:
 * librpma reports an empty non-blocking channel as RPMA_E_PROVIDER (EAGAIN),
 * not RPMA_E_NO_EVENT, and these programs run on librpma as well.
 * 0, EXAMPLE_TIMED_OUT or an RPMA_E_* value. */
int next_conn_req(struct rpma_ep* ep, const struct rpma_conn_cfg* cfg, int timeout_ms,
                  struct rpma_conn_req** req_ptr);

/* The next connection event, waiting up to timeout_ms: the connection's fd
 * (rpma_conn_get_event_fd) is polled, then the event read (as next_conn_req).
 * 0, EXAMPLE_TIMED_OUT or an RPMA_E_* value. */
int next_event(struct rpma_conn* conn, int timeout_ms, enum rpma_conn_event* event);

/* Private data as text in the buffer: transports may pad it (with zeros),
 * so it stops at the first NUL or at the end. */
const char* pdata_text(const struct rpma_conn_private_data* pdata, char* buf, size_t size);

#endif /* CONNECTION_EXAMPLE_COMMON_H */
