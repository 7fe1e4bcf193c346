/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server.c -- SRQ example, C flavour (librpma's API only): the server.
 * Makes a shared receive queue with a receive CQ of its own (rpma_srq_new),
 * posts one receive per expected message on it before any connection exists
 * (rpma_srq_recv), accepts CONNECTIONS connections whose QPs take their
 * receives from it (rpma_conn_cfg_set_srq), then takes every message from
 * the SRQ's CQ (rpma_srq_get_rcq): the completion's qp_num says which
 * connection it came on (librpma's examples/13-messages-ping-pong-with-srq,
 * one-way).
 *
 * usage: srq_c_server <addr> <port>
 */

#include "../../common.h"
#include "../protocol.h"

#include <librpma.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHO "server"

static char memory[CONNECTIONS * SLOT];

/* The index of the connection whose QP is qp_num, or -1. */
static int conn_of(struct rpma_conn* conns[], uint32_t qp_num) {
  for (int i = 0; i < CONNECTIONS; ++i) {
    uint32_t qp = 0;
    if (conns[i] && rpma_conn_get_qp_num(conns[i], &qp) == 0 && qp == qp_num) return i;
  }
  return -1;
}

/* Takes the CONNECTIONS messages from the SRQ's receive CQ. */
static int take_messages(struct rpma_srq* srq, struct rpma_conn* conns[]) {
  struct rpma_cq* rcq = NULL;
  int ret = rpma_srq_get_rcq(srq, &rcq);
  if (ret) return dp_fail(WHO, "rpma_srq_get_rcq", ret);
  for (int n = 0; n < CONNECTIONS; ++n) {
    struct ibv_wc wc = {0};
    if (dp_wait_wc(WHO, "receive", rcq, &wc)) return -1;
    const int slot = (int)wc.wr_id; /* the receive's slot, given as its op_context */
    const int from = conn_of(conns, wc.qp_num);
    char expected[SLOT];
    snprintf(expected, sizeof(expected), MESSAGE_FORMAT, from);
    const char* text = memory + (size_t)slot * SLOT;
    if (from < 0 || strncmp(text, expected, SLOT) != 0) {
      printf("%s: unexpected message \"%.*s\" on qp %u\n", WHO, SLOT, text, wc.qp_num);
      return -1;
    }
    printf("%s: got \"%s\" on connection %d (from the SRQ's receive CQ)\n", WHO, text, from);
  }
  return 0;
}

/* Accepts CONNECTIONS requests, each QP receiving from the SRQ; then the
 * messages; then waits for the client to close each connection. */
static int serve(struct rpma_ep* ep, struct rpma_srq* srq) {
  struct rpma_conn_cfg* cfg = NULL;
  int ret = rpma_conn_cfg_new(&cfg);
  if (ret) return dp_fail(WHO, "rpma_conn_cfg_new", ret);
  int failed = 0;
  struct rpma_conn* conns[CONNECTIONS] = {NULL};
  if ((ret = rpma_conn_cfg_set_srq(cfg, srq))) failed = dp_fail(WHO, "rpma_conn_cfg_set_srq", ret);
  for (int i = 0; i < CONNECTIONS && !failed; ++i) {
    struct rpma_conn_req* req = NULL;
    failed = dp_next_req(WHO, ep, cfg, &req) || dp_accept(WHO, &req, NULL, 0, &conns[i]);
  }
  if (!failed) failed = take_messages(srq, conns);
  for (int i = 0; i < CONNECTIONS; ++i)
    if (conns[i] && dp_wait_closed(WHO, "client", &conns[i])) failed = 1;
  (void)rpma_conn_cfg_delete(&cfg);
  return failed ? -1 : 0;
}

/* The SRQ (queue and its receive CQ sized for CONNECTIONS receives), with one
 * receive posted per slot. */
static int make_srq(struct rpma_peer* peer, struct rpma_mr_local* mr, struct rpma_srq** srq_ptr) {
  struct rpma_srq_cfg* cfg = NULL;
  int ret = rpma_srq_cfg_new(&cfg);
  if (ret) return dp_fail(WHO, "rpma_srq_cfg_new", ret);
  if (!(ret = rpma_srq_cfg_set_rq_size(cfg, CONNECTIONS)) &&
      !(ret = rpma_srq_cfg_set_rcq_size(cfg, CONNECTIONS)))
    ret = rpma_srq_new(peer, cfg, srq_ptr);
  (void)rpma_srq_cfg_delete(&cfg);
  if (ret) return dp_fail(WHO, "rpma_srq_new", ret);
  for (int i = 0; i < CONNECTIONS; ++i) {
    ret = rpma_srq_recv(*srq_ptr, mr, (size_t)i * SLOT, SLOT, (const void*)(uintptr_t)i);
    if (ret) {
      (void)rpma_srq_delete(srq_ptr);
      return dp_fail(WHO, "rpma_srq_recv", ret);
    }
  }
  printf("%s: %d receives posted on the shared receive queue\n", WHO, CONNECTIONS);
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
  struct rpma_srq* srq = NULL;
  struct rpma_ep* ep = NULL;
  int ret = rpma_mr_reg(peer, memory, sizeof(memory), RPMA_MR_USAGE_RECV, &mr);
  if (ret) {
    dp_fail(WHO, "rpma_mr_reg", ret);
    goto out_peer_delete;
  }
  if (make_srq(peer, mr, &srq)) goto out_mr_dereg;
  if (dp_listen(WHO, peer, addr, port, &ep)) goto out_srq_delete;
  failed = serve(ep, srq);

  ret = rpma_ep_shutdown(&ep);
  if (ret) failed = dp_fail(WHO, "rpma_ep_shutdown", ret);
out_srq_delete:
  ret = rpma_srq_delete(&srq);
  if (ret) failed = dp_fail(WHO, "rpma_srq_delete", ret);
out_mr_dereg:
  ret = rpma_mr_dereg(&mr);
  if (ret) failed = dp_fail(WHO, "rpma_mr_dereg", ret);
out_peer_delete:
  ret = rpma_peer_delete(&peer);
  if (ret) failed = dp_fail(WHO, "rpma_peer_delete", ret);
  printf("%s: %s\n", WHO, failed ? "FAILED" : "done");
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
