/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client.c -- connection example, C flavour (librpma's API only): the
 * client. Connects with a "hello" in its private data, waits for
 * ESTABLISHED, reads the server's "hello", disconnects and waits for CLOSED,
 * as librpma's examples/01-connection does. While the server is not
 * listening yet (REJECTED or UNREACHABLE; on iWARP, rpma_conn_req_connect's
 * RPMA_E_PROVIDER) it retries the whole sequence for up to 5 s. Every wait
 * is bounded: the fd is non-blocking and polled for at most 10 s.
 *
 * usage: connection_c_client <addr> <port>
 */

#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <librpma.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int fail(const char* step, int ret) {
  if (ret == EXAMPLE_TIMED_OUT)
    printf("client: %s: nothing heard for %d ms, giving up\n", step, QUIET_LIMIT_MS);
  else
    printf("client: %s failed: %s\n", step, rpma_err_2str(ret));
  return -1;
}

static void pause_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Connects, retrying while the server is not listening yet: 0 and *conn_ptr
 * established, or -1 (reported). */
static int connect_with_retry(struct rpma_peer* peer, const char* addr, const char* port,
                              struct rpma_conn** conn_ptr) {
  const long long give_up = now_ms() + RETRY_LIMIT_MS;
  struct rpma_conn_private_data hello = {CLIENT_HELLO, sizeof(CLIENT_HELLO)};
  for (int attempt = 1;; ++attempt) {
    struct rpma_conn_req* req = NULL;
    int ret = rpma_conn_req_new(peer, addr, port, NULL, &req);
    if (ret) return fail("rpma_conn_req_new", ret);
    /* Connecting consumes the request, whatever the outcome. */
    ret = rpma_conn_req_connect(&req, &hello, conn_ptr);
    if (ret == RPMA_E_PROVIDER && now_ms() <= give_up) {
      /* iWARP refuses in rdma_connect itself (the kernel's TCP connect), not as REJECTED. */
      if (attempt == 1) printf("client: server not there yet (refused), retrying for up to 5 s\n");
      pause_ms(RETRY_PAUSE_MS);
      continue;
    }
    if (ret) return fail("connecting", ret);

    enum rpma_conn_event event = RPMA_CONN_UNDEFINED;
    ret = next_event(*conn_ptr, QUIET_LIMIT_MS, &event);
    if (!ret && event == RPMA_CONN_ESTABLISHED) {
      if (attempt > 1) printf("client: server answered on attempt %d\n", attempt);
      return 0;
    }
    (void)rpma_conn_delete(conn_ptr);
    if (ret) return fail("waiting for the connection to be established", ret);
    if (event != RPMA_CONN_REJECTED && event != RPMA_CONN_UNREACHABLE) {
      printf("client: connection not established: %s\n", rpma_utils_conn_event_2str(event));
      return -1;
    }
    if (now_ms() > give_up) {
      printf("client: no server after 5 s of retries: %s\n", rpma_utils_conn_event_2str(event));
      return -1;
    }
    if (attempt == 1)
      printf("client: server not there yet (%s), retrying for up to 5 s\n",
             rpma_utils_conn_event_2str(event));
    pause_ms(RETRY_PAUSE_MS);
  }
}

/* Reads the server's hello, disconnects and waits for CLOSED: 0 or -1. */
static int talk_and_close(struct rpma_conn* conn) {
  struct rpma_conn_private_data pdata;
  char text[64];
  int ret = rpma_conn_get_private_data(conn, &pdata);
  if (ret) return fail("rpma_conn_get_private_data", ret);
  printf("client: connection established, server's private data \"%s\"\n",
         pdata_text(&pdata, text, sizeof(text)));

  ret = rpma_conn_disconnect(conn);
  if (ret) return fail("rpma_conn_disconnect", ret);
  enum rpma_conn_event event = RPMA_CONN_UNDEFINED;
  ret = next_event(conn, QUIET_LIMIT_MS, &event);
  if (ret) return fail("waiting for the connection to close", ret);
  if (event != RPMA_CONN_CLOSED) {
    printf("client: unexpected connection event: %s\n", rpma_utils_conn_event_2str(event));
    return -1;
  }
  return 0;
}

int main(int argc, char* argv[]) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* each line visible at once, also in a pipe */
  const char* addr = NULL;
  const char* port = NULL;
  if (parse_args(argc, argv, &addr, &port, NULL)) return 2;

  struct ibv_context* dev = NULL;
  int ret = rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev);
  if (ret) {
    printf("client: no RDMA device reaches %s: %s\n", addr, rpma_err_2str(ret));
    return EXIT_FAILURE;
  }
  struct rpma_peer* peer = NULL;
  ret = rpma_peer_new(dev, &peer);
  if (ret) {
    printf("client: cannot create the peer: %s\n", rpma_err_2str(ret));
    return EXIT_FAILURE;
  }

  printf("client: connecting to %s:%s, private data \"%s\"\n", addr, port, CLIENT_HELLO);
  struct rpma_conn* conn = NULL;
  int failed = connect_with_retry(peer, addr, port, &conn) != 0;
  if (!failed) {
    failed = talk_and_close(conn) != 0;
    ret = rpma_conn_delete(&conn);
    if (ret) failed = fail("rpma_conn_delete", ret) != 0;
    if (!failed) printf("client: disconnected, connection closed\n");
  }

  ret = rpma_peer_delete(&peer);
  if (ret) failed = fail("rpma_peer_delete", ret) != 0;
  printf("client: %s\n", failed ? "FAILED" : "done");
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
