/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * main.c -- a librpma program built against the installed arpma, unchanged:
 * cc main.c $(pkg-config --cflags --libs librpma) (test/consumer/run.sh).
 * A connection request on 127.0.0.1 (soft provider on loopback; nothing
 * listens: the request only resolves and creates its QP).
 */

#include <librpma.h>

#include <stdio.h>
#include <stdlib.h>

int main(void) {
  struct ibv_context* dev = NULL;
  int ret = rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev);
  if (ret) {
    printf("rpma_utils_get_ibv_context: %s\n", rpma_err_2str(ret));
    return EXIT_FAILURE;
  }

  struct rpma_peer* peer = NULL;
  ret = rpma_peer_new(dev, &peer);
  if (ret) {
    printf("rpma_peer_new: %s\n", rpma_err_2str(ret));
    return EXIT_FAILURE;
  }

  struct rpma_conn_req* req = NULL;
  ret = rpma_conn_req_new(peer, "127.0.0.1", "7204", NULL, &req);
  if (ret) {
    printf("rpma_conn_req_new: %s\n", rpma_err_2str(ret));
    (void)rpma_peer_delete(&peer);
    return EXIT_FAILURE;
  }

  ret = rpma_conn_req_delete(&req);
  if (!ret) ret = rpma_peer_delete(&peer);
  if (ret) {
    printf("delete: %s\n", rpma_err_2str(ret));
    return EXIT_FAILURE;
  }
  printf("Success\n");
  return EXIT_SUCCESS;
}
