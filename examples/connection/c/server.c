/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server.c -- connection example, C flavour (librpma's API only): the
 * server. Listens, takes one connection request (or --count N, one after
 * another), reads the client's "hello" from its private data, accepts with a
 * "hello" of its own, waits for ESTABLISHED, then for the client to
 * disconnect, as librpma's examples/01-connection does. Every wait is
 * bounded: the fds are non-blocking and polled for at most 10 s.
 *
 * usage: connection_c_server <addr> <port> [--count N]
 */

#include "common.h"

#include <librpma.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char* step, int ret) {
  if (ret == EXAMPLE_TIMED_OUT)
    printf("server: %s: nothing heard for %d ms, giving up\n", step, QUIET_LIMIT_MS);
  else
    printf("server: %s failed: %s\n", step, rpma_err_2str(ret));
  return -1;
}

/* Serves one connection from request to close: 0, or -1 (reported). */
static int serve_one(struct rpma_ep* ep) {
  struct rpma_conn_req* req = NULL;
  int ret = next_conn_req(ep, NULL, QUIET_LIMIT_MS, &req);
  if (ret) return fail("waiting for a connection request", ret);

  struct rpma_conn_private_data pdata;
  char text[64];
  ret = rpma_conn_req_get_private_data(req, &pdata);
  if (ret) {
    (void)rpma_conn_req_delete(&req); /* rejects it */
    return fail("reading the request's private data", ret);
  }
  printf("server: request from client, private data \"%s\"\n",
         pdata_text(&pdata, text, sizeof(text)));

  /* Accepting consumes the request, whatever the outcome. */
  struct rpma_conn_private_data hello = {SERVER_HELLO, sizeof(SERVER_HELLO)};
  struct rpma_conn* conn = NULL;
  ret = rpma_conn_req_connect(&req, &hello, &conn);
  if (ret) return fail("accepting", ret);

  enum rpma_conn_event event = RPMA_CONN_UNDEFINED;
  ret = next_event(conn, QUIET_LIMIT_MS, &event);
  if (ret) {
    fail("waiting for the connection to be established", ret);
    goto err_conn_delete;
  }
  if (event != RPMA_CONN_ESTABLISHED) {
    printf("server: connection not established: %s\n", rpma_utils_conn_event_2str(event));
    goto err_conn_delete;
  }
  printf("server: connection established, answered \"%s\"\n", SERVER_HELLO);

  ret = next_event(conn, QUIET_LIMIT_MS, &event);
  if (ret) {
    fail("waiting for the client to disconnect", ret);
    goto err_conn_delete;
  }
  if (event != RPMA_CONN_CLOSED) {
    printf("server: unexpected connection event: %s\n", rpma_utils_conn_event_2str(event));
    goto err_conn_delete;
  }
  printf("server: client disconnected, closing\n");

  ret = rpma_conn_disconnect(conn);
  if (ret) {
    fail("rpma_conn_disconnect", ret);
    goto err_conn_delete;
  }
  ret = rpma_conn_delete(&conn);
  if (ret) return fail("rpma_conn_delete", ret);
  printf("server: connection closed\n");
  return 0;

err_conn_delete:
  (void)rpma_conn_delete(&conn);
  return -1;
}

int main(int argc, char* argv[]) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* each line visible at once, also in a pipe */
  const char* addr = NULL;
  const char* port = NULL;
  int count = 1;
  if (parse_args(argc, argv, &addr, &port, &count)) return 2;

  struct ibv_context* dev = NULL;
  int ret = rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev);
  if (ret) {
    printf("server: no RDMA device owns %s: %s\n", addr, rpma_err_2str(ret));
    return EXIT_FAILURE;
  }
  struct rpma_peer* peer = NULL;
  ret = rpma_peer_new(dev, &peer);
  if (ret) {
    printf("server: cannot create the peer: %s\n", rpma_err_2str(ret));
    return EXIT_FAILURE;
  }

  int failed = 1;
  struct rpma_ep* ep = NULL;
  ret = rpma_ep_listen(peer, addr, port, &ep);
  if (ret) {
    printf("server: cannot listen on %s:%s: %s\n", addr, port, rpma_err_2str(ret));
    goto out_peer_delete;
  }
  /* librpma's API has no getter for the port "0" picked. */
  printf("server: listening on %s:%s%s\n", addr, port,
         strcmp(port, "0") == 0 ? " (a free port; the C API cannot tell which)" : "");

  failed = 0;
  for (int i = 0; i < count && !failed; ++i) failed = serve_one(ep) != 0;

  ret = rpma_ep_shutdown(&ep);
  if (ret) {
    printf("server: shutting the endpoint down failed: %s\n", rpma_err_2str(ret));
    failed = 1;
  }

out_peer_delete:
  ret = rpma_peer_delete(&peer);
  if (ret) {
    printf("server: deleting the peer failed: %s\n", rpma_err_2str(ret));
    failed = 1;
  }
  printf("server: %s\n", failed ? "FAILED" : "done, endpoint shut down");
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
