/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * main.c -- rpma_conn_req_new as a C program sees it: librpma's API, blocking.
 *
 * usage: conn_req_new_c <address> <port>
 */

#include <librpma.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char* argv[]) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s <address> <port>\n", argv[0]);
    return 2;
  }
  const char* addr = argv[1];
  const char* port = argv[2];

  struct ibv_context* dev = NULL;
  int ret = rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev);
  if (ret) {
    printf("[c] rpma_utils_get_ibv_context(%s): %s (%d)\n", addr, rpma_err_2str(ret), ret);
    return 1;
  }

  struct rpma_peer* peer = NULL;
  ret = rpma_peer_new(dev, &peer);
  if (ret) {
    printf("[c] rpma_peer_new: %s (%d)\n", rpma_err_2str(ret), ret);
    return 1;
  }

  struct rpma_conn_cfg* cfg = NULL;
  ret = rpma_conn_cfg_new(&cfg);
  if (!ret) ret = rpma_conn_cfg_set_rcq_size(cfg, 10);

  struct rpma_conn_req* req = NULL;
  if (!ret) ret = rpma_conn_req_new(peer, addr, port, cfg, &req);
  printf("[c] rpma_conn_req_new(%s, %s): %s (%d)\n", addr, port, rpma_err_2str(ret), ret);

  int failed = ret != 0;
  if (req && rpma_conn_req_delete(&req)) failed = 1;
  (void)rpma_conn_cfg_delete(&cfg);
  if (rpma_peer_delete(&peer)) failed = 1;
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
