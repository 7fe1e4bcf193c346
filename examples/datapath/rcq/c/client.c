/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client.c -- receive-CQ example, C flavour (librpma's API only): the
 * client. Its connection has a receive CQ too (protocol.h): for each round
 * it posts a receive for the answer, sends "message i" and waits for the
 * send's completion on the CQ, then for the answer on the RCQ.
 *
 * usage: rcq_c_client <addr> <port>
 */

#include "common_rcq.h"

#include <stdlib.h>

#define WHO "client"

static char buf[REGION];

static int rounds(struct rpma_conn* conn, struct rpma_mr_local* mr) {
  for (int i = 1; i <= ROUNDS; ++i) {
    int ret = rpma_recv(conn, mr, RECV_OFFSET, SLOT, NULL);
    if (ret) return dp_fail(WHO, "rpma_recv", ret);
    snprintf(buf + SEND_OFFSET, SLOT, "message %d", i);
    if (rcq_send(WHO, conn, mr, buf + SEND_OFFSET)) return -1;
    struct ibv_wc wc = {0};
    if (rcq_wait_recv(WHO, conn, &wc)) return -1;
    printf("%s: got \"%s\" on the receive CQ\n", WHO, buf + RECV_OFFSET);
  }
  printf("%s: %d round trips done\n", WHO, ROUNDS);
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
  struct rpma_conn_cfg* cfg = NULL;
  struct rpma_conn* conn = NULL;
  int ret = rpma_mr_reg(peer, buf, sizeof(buf), RPMA_MR_USAGE_RECV | RPMA_MR_USAGE_SEND, &mr);
  if (ret) {
    dp_fail(WHO, "rpma_mr_reg", ret);
    goto out_peer_delete;
  }
  if (rcq_cfg_new(WHO, &cfg)) goto out_mr_dereg;
  if (dp_connect(WHO, peer, addr, port, cfg, &conn)) goto out_cfg_delete;
  failed = rounds(conn, mr);
  if (dp_wait_closed(WHO, "server", &conn)) failed = 1;

out_cfg_delete:
  (void)rpma_conn_cfg_delete(&cfg);
out_mr_dereg:
  ret = rpma_mr_dereg(&mr);
  if (ret) failed = dp_fail(WHO, "rpma_mr_dereg", ret);
out_peer_delete:
  ret = rpma_peer_delete(&peer);
  if (ret) failed = dp_fail(WHO, "rpma_peer_delete", ret);
  printf("%s: %s\n", WHO, failed ? "FAILED" : "done");
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
