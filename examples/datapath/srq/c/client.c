/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client.c -- SRQ example, C flavour (librpma's API only): the client.
 * Opens CONNECTIONS connections one after another, sends "hello from
 * connection i" on connection i and waits for each send's completion (the
 * server has acknowledged it), then disconnects them all. Nothing in it
 * knows that the server receives through a shared receive queue.
 *
 * usage: srq_c_client <addr> <port>
 */

#include "../../common.h"
#include "../protocol.h"

#include <librpma.h>

#include <stdio.h>
#include <stdlib.h>

#define WHO "client"

static char buf[CONNECTIONS * SLOT];

static int send_hello(struct rpma_conn* conn, struct rpma_mr_local* mr, int i) {
  char* text = buf + (size_t)i * SLOT;
  const size_t len = (size_t)snprintf(text, SLOT, MESSAGE_FORMAT, i) + 1;
  int ret = rpma_send(conn, mr, (size_t)i * SLOT, len, RPMA_F_COMPLETION_ALWAYS, NULL);
  if (ret) return dp_fail(WHO, "rpma_send", ret);
  struct rpma_cq* cq = NULL;
  if ((ret = rpma_conn_get_cq(conn, &cq))) return dp_fail(WHO, "rpma_conn_get_cq", ret);
  struct ibv_wc wc = {0};
  if (dp_wait_wc(WHO, "send", cq, &wc)) return -1;
  printf("%s: sent \"%s\" on connection %d\n", WHO, text, i);
  return 0;
}

int main(int argc, char* argv[]) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* addr = NULL;
  const char* port = NULL;
  if (parse_args(argc, argv, &addr, &port, NULL)) return 2;

  struct rpma_peer* peer = NULL;
  if (dp_peer_new(WHO, addr, 0, &peer)) return EXIT_FAILURE;
  int failed = 1;
  struct rpma_mr_local* mr = NULL;
  int ret = rpma_mr_reg(peer, buf, sizeof(buf), RPMA_MR_USAGE_SEND, &mr);
  if (ret) {
    dp_fail(WHO, "rpma_mr_reg", ret);
    goto out_peer_delete;
  }
  struct rpma_conn* conns[CONNECTIONS] = {NULL};
  failed = 0;
  for (int i = 0; i < CONNECTIONS && !failed; ++i)
    failed = dp_connect(WHO, peer, addr, port, NULL, &conns[i]) != 0;
  for (int i = 0; i < CONNECTIONS && !failed; ++i) failed = send_hello(conns[i], mr, i) != 0;
  for (int i = 0; i < CONNECTIONS; ++i)
    if (conns[i] && dp_disconnect(WHO, &conns[i])) failed = 1;
  if (!failed) printf("%s: %d messages sent on %d connections\n", WHO, CONNECTIONS, CONNECTIONS);

  ret = rpma_mr_dereg(&mr);
  if (ret) failed = dp_fail(WHO, "rpma_mr_dereg", ret);
out_peer_delete:
  ret = rpma_peer_delete(&peer);
  if (ret) failed = dp_fail(WHO, "rpma_peer_delete", ret);
  printf("%s: %s\n", WHO, failed ? "FAILED" : "done");
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
