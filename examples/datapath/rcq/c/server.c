/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server.c -- receive-CQ example, C flavour (librpma's API only): the
 * server. Its connection has a receive CQ (protocol.h): the first receive is
 * posted on the request (rpma_conn_req_recv), each message taken from the
 * RCQ (rpma_conn_get_rcq), the next receive posted, and the message sent
 * back in capitals, whose completion comes on the CQ (librpma's
 * examples/12-receive-completion-queue).
 *
 * usage: rcq_c_server <addr> <port>
 */

#define _POSIX_C_SOURCE 200809L /* strnlen */

#include "common_rcq.h"

#include <ctype.h>
#include <stdlib.h>

#define WHO "server"

static char memory[REGION];

static int echo(struct rpma_conn* conn, struct rpma_mr_local* mr) {
  for (int i = 1; i <= ROUNDS; ++i) {
    struct ibv_wc wc = {0};
    if (rcq_wait_recv(WHO, conn, &wc)) return -1;
    /* The message may not end in a NUL within the slot: bound it. */
    const size_t len = strnlen(memory + RECV_OFFSET, wc.byte_len < SLOT ? wc.byte_len : SLOT - 1);
    char* reply = memory + SEND_OFFSET;
    memcpy(reply, memory + RECV_OFFSET, len);
    reply[len] = '\0';
    printf("%s: got \"%s\" on the receive CQ\n", WHO, reply);
    for (char* c = reply; *c; ++c) *c = (char)toupper((unsigned char)*c);
    /* The next receive before the answer: the client's next message follows it. */
    int ret;
    if (i < ROUNDS && (ret = rpma_recv(conn, mr, RECV_OFFSET, SLOT, NULL)))
      return dp_fail(WHO, "rpma_recv", ret);
    if (rcq_send(WHO, conn, mr, reply)) return -1;
  }
  return 0;
}

int main(int argc, char* argv[]) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* each line visible at once, also in a pipe */
  const char* addr = NULL;
  const char* port = NULL;
  if (parse_args(argc, argv, &addr, &port, NULL)) return 2;

  struct rpma_peer* peer = NULL;
  if (dp_peer_new(WHO, addr, 1, &peer)) return EXIT_FAILURE;
  int failed = 1;
  struct rpma_mr_local* mr = NULL;
  struct rpma_conn_cfg* cfg = NULL;
  struct rpma_ep* ep = NULL;
  int ret = rpma_mr_reg(peer, memory, sizeof(memory), RPMA_MR_USAGE_RECV | RPMA_MR_USAGE_SEND, &mr);
  if (ret) {
    dp_fail(WHO, "rpma_mr_reg", ret);
    goto out_peer_delete;
  }
  if (rcq_cfg_new(WHO, &cfg)) goto out_mr_dereg;
  if (dp_listen(WHO, peer, addr, port, &ep)) goto out_cfg_delete;

  struct rpma_conn_req* req = NULL;
  struct rpma_conn* conn = NULL;
  if (dp_next_req(WHO, ep, cfg, &req)) goto out_ep_shutdown;
  ret = rpma_conn_req_recv(req, mr, RECV_OFFSET, SLOT, NULL);
  if (ret) {
    dp_fail(WHO, "rpma_conn_req_recv", ret);
    (void)rpma_conn_req_delete(&req); /* rejects it */
    goto out_ep_shutdown;
  }
  if (dp_accept(WHO, &req, NULL, 0, &conn)) goto out_ep_shutdown;
  failed = echo(conn, mr);
  /* The server sends last, so it disconnects (as in ping_pong). */
  if (dp_disconnect(WHO, &conn)) failed = 1;

out_ep_shutdown:
  ret = rpma_ep_shutdown(&ep);
  if (ret) failed = dp_fail(WHO, "rpma_ep_shutdown", ret);
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
