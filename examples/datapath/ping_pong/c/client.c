/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client.c -- ping-pong example, C flavour (librpma's API only): the client.
 * Connects, decodes the server's region from the accept's private data, and
 * plays the rounds of protocol.h: each time it posts a receive for the pong
 * first (rpma_recv: the server's answer always finds one), then sends
 * "ping i" -- rpma_send, rpma_send_with_imm or rpma_write_with_imm into the
 * server's region, with the round number as immediate data -- and waits for
 * both completions (librpma's examples/08-messages-ping-pong,
 * 10-send-with-imm and 11-write-with-imm, in one).
 *
 * usage: ping_pong_c_client <addr> <port>
 */

#include "protocol.h"

#include <librpma.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHO "client"

static char buf[CLIENT_SIZE];

static int ping(struct rpma_conn* conn, struct rpma_mr_remote* remote, struct rpma_mr_local* mr) {
  struct rpma_cq* cq = NULL;
  int ret = rpma_conn_get_cq(conn, &cq);
  if (ret) return dp_fail(WHO, "rpma_conn_get_cq", ret);
  for (int i = 1; i <= ROUNDS; ++i) {
    ret = rpma_recv(conn, mr, CLIENT_RECV_OFFSET, MESSAGE_MAX, NULL);
    if (ret) return dp_fail(WHO, "rpma_recv", ret);
    char* text = buf + PING_OFFSET;
    const size_t len = (size_t)snprintf(text, MESSAGE_MAX, "ping %d", i) + 1;
    const int flags = RPMA_F_COMPLETION_ALWAYS;
    if (i == SEND_WITH_IMM_ROUND) {
      ret = rpma_send_with_imm(conn, mr, PING_OFFSET, len, flags, (uint32_t)i, NULL);
      if (ret) return dp_fail(WHO, "rpma_send_with_imm", ret);
      printf("%s: sent \"%s\" by send_with_imm, immediate data %d\n", WHO, text, i);
    } else if (i == WRITE_WITH_IMM_ROUND) {
      ret = rpma_write_with_imm(conn, remote, WRITE_OFFSET, mr, PING_OFFSET, len, flags,
                                (uint32_t)i, NULL);
      if (ret) return dp_fail(WHO, "rpma_write_with_imm", ret);
      printf("%s: sent \"%s\" by write_with_imm into the server's region, immediate data %d\n", WHO,
             text, i);
    } else {
      ret = rpma_send(conn, mr, PING_OFFSET, len, flags, NULL);
      if (ret) return dp_fail(WHO, "rpma_send", ret);
      printf("%s: sent \"%s\" by send\n", WHO, text);
    }
    int sends = 1;
    struct ibv_wc wc = {0};
    if (wait_for(WHO, cq, &sends, &wc)) return -1;
    const char* pong = buf + CLIENT_RECV_OFFSET;
    printf("%s: got \"%.*s\"\n", WHO, MESSAGE_MAX, pong);
    char expected[MESSAGE_MAX];
    snprintf(expected, sizeof(expected), "pong %d", i);
    if (strncmp(pong, expected, MESSAGE_MAX) != 0) return -1;
  }
  printf("%s: %d round trips done\n", WHO, ROUNDS);
  return 0;
}

int main(int argc, char* argv[]) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* each line visible at once, also in a pipe */
  const char* addr = NULL;
  const char* port = NULL;
  if (parse_args(argc, argv, &addr, &port, NULL)) return 2;

  struct rpma_peer* peer = NULL;
  if (dp_peer_new(WHO, addr, 0, &peer)) return EXIT_FAILURE;
  int failed = 1;
  struct rpma_mr_local* mr = NULL;
  int ret = rpma_mr_reg(peer, buf, sizeof(buf),
                        RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV | RPMA_MR_USAGE_WRITE_SRC, &mr);
  if (ret) {
    dp_fail(WHO, "rpma_mr_reg", ret);
    goto out_peer_delete;
  }

  printf("%s: connecting to %s:%s\n", WHO, addr, port);
  struct rpma_conn* conn = NULL;
  if (dp_connect(WHO, peer, addr, port, NULL, &conn)) goto out_mr_dereg;
  struct rpma_mr_remote* remote = NULL;
  if (!dp_server_region(WHO, conn, &remote)) {
    failed = ping(conn, remote, mr);
    ret = rpma_mr_remote_delete(&remote);
    if (ret) failed = dp_fail(WHO, "rpma_mr_remote_delete", ret);
  }
  /* The server disconnects once its last pong has completed. */
  if (failed ? dp_disconnect(WHO, &conn) : dp_wait_closed(WHO, "server", &conn)) failed = 1;

out_mr_dereg:
  ret = rpma_mr_dereg(&mr);
  if (ret) failed = dp_fail(WHO, "rpma_mr_dereg", ret);
out_peer_delete:
  ret = rpma_peer_delete(&peer);
  if (ret) failed = dp_fail(WHO, "rpma_peer_delete", ret);
  printf("%s: %s\n", WHO, failed ? "FAILED" : "done");
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
