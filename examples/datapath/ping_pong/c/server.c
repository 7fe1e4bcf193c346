/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server.c -- ping-pong example, C flavour (librpma's API only): the server.
 * Posts the first receive on the request, before accepting
 * (rpma_conn_req_recv: the client's first ping finds it), accepts with its
 * region's descriptor as private data (the client's write_with_imm lands
 * there), then answers each "ping i" with a send of "pong i", posting the
 * next receive before each pong (protocol: protocol.h).
 *
 * usage: ping_pong_c_server <addr> <port>
 */

#define _POSIX_C_SOURCE 200809L /* ntohl */

#include "protocol.h"

#include <librpma.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHO "server"

static char memory[SERVER_SIZE];

/* Checks ping i and says how it came: 0 or -1. */
static int check_ping(const struct ibv_wc* wc, int i) {
  const int by_write = wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM;
  const int has_imm = (wc->wc_flags & IBV_WC_WITH_IMM) != 0;
  const unsigned imm = has_imm ? ntohl(wc->imm_data) : 0;
  const int want_imm = i == SEND_WITH_IMM_ROUND || i == WRITE_WITH_IMM_ROUND;
  const char* text = memory + (by_write ? WRITE_OFFSET : RECV_OFFSET);
  char expected[MESSAGE_MAX];
  snprintf(expected, sizeof(expected), "ping %d", i);
  if (strncmp(text, expected, MESSAGE_MAX) != 0 || by_write != (i == WRITE_WITH_IMM_ROUND) ||
      has_imm != want_imm || (has_imm && imm != (unsigned)i)) {
    printf("%s: unexpected message in round %d: \"%.*s\"\n", WHO, i, MESSAGE_MAX, text);
    return -1;
  }
  if (want_imm)
    printf("%s: got \"%s\" (%s with immediate data %u)\n", WHO, text, by_write ? "write" : "send",
           imm);
  else
    printf("%s: got \"%s\" (send)\n", WHO, text);
  return 0;
}

static int pong(struct rpma_conn* conn, struct rpma_mr_local* mr) {
  struct rpma_cq* cq = NULL;
  int ret = rpma_conn_get_cq(conn, &cq);
  if (ret) return dp_fail(WHO, "rpma_conn_get_cq", ret);
  int sends = 0;
  for (int i = 1; i <= ROUNDS; ++i) {
    struct ibv_wc wc = {0};
    if (wait_for(WHO, cq, &sends, &wc) || check_ping(&wc, i)) return -1;
    /* The next receive before the pong: the client's next ping follows it. */
    if (i < ROUNDS && (ret = rpma_recv(conn, mr, RECV_OFFSET, MESSAGE_MAX, NULL)))
      return dp_fail(WHO, "rpma_recv", ret);
    char* text = memory + PONG_OFFSET;
    const size_t len = (size_t)snprintf(text, MESSAGE_MAX, "pong %d", i) + 1;
    ret = rpma_send(conn, mr, PONG_OFFSET, len, RPMA_F_COMPLETION_ALWAYS, NULL);
    if (ret) return dp_fail(WHO, "rpma_send", ret);
    ++sends;
    printf("%s: sent \"%s\"\n", WHO, text);
  }
  if (wait_for(WHO, cq, &sends, NULL)) return -1;
  printf("%s: %d round trips done\n", WHO, ROUNDS);
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
  int ret = rpma_mr_reg(peer, memory, sizeof(memory),
                        RPMA_MR_USAGE_RECV | RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_WRITE_DST, &mr);
  if (ret) {
    dp_fail(WHO, "rpma_mr_reg", ret);
    goto out_peer_delete;
  }
  char desc[21]; /* rpma_mr_get_descriptor_size() */
  ret = rpma_mr_get_descriptor(mr, desc);
  if (ret) {
    dp_fail(WHO, "rpma_mr_get_descriptor", ret);
    goto out_mr_dereg;
  }
  struct rpma_ep* ep = NULL;
  if (dp_listen(WHO, peer, addr, port, &ep)) goto out_mr_dereg;

  struct rpma_conn_req* req = NULL;
  struct rpma_conn* conn = NULL;
  if (dp_next_req(WHO, ep, NULL, &req)) goto out_ep_shutdown;
  ret = rpma_conn_req_recv(req, mr, RECV_OFFSET, MESSAGE_MAX, NULL);
  if (ret) {
    dp_fail(WHO, "rpma_conn_req_recv", ret);
    (void)rpma_conn_req_delete(&req); /* rejects it */
    goto out_ep_shutdown;
  }
  if (dp_accept(WHO, &req, desc, sizeof(desc), &conn)) goto out_ep_shutdown;
  failed = pong(conn, mr);
  /* The server sends last, so it disconnects: were the client to disconnect
   * as soon as it has the last pong, the server's send could still be
   * waiting for its acknowledgement and be flushed. */
  if (dp_disconnect(WHO, &conn)) failed = 1;

out_ep_shutdown:
  ret = rpma_ep_shutdown(&ep);
  if (ret) failed = dp_fail(WHO, "rpma_ep_shutdown", ret);
out_mr_dereg:
  ret = rpma_mr_dereg(&mr);
  if (ret) failed = dp_fail(WHO, "rpma_mr_dereg", ret);
out_peer_delete:
  ret = rpma_peer_delete(&peer);
  if (ret) failed = dp_fail(WHO, "rpma_peer_delete", ret);
  printf("%s: %s\n", WHO, failed ? "FAILED" : "done");
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
