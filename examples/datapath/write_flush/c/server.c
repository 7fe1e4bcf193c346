/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server.c -- write + flush example, C flavour (librpma's API only): the
 * server. Registers a region the client may write to and flush (to
 * visibility), sends its descriptor in the accept's private data, waits for
 * the client to disconnect, then prints what landed in its memory. It posts
 * nothing: the client's writes move the data without it.
 *
 * usage: write_flush_c_server <addr> <port>
 */

#include "../../common.h"

#include <librpma.h>

#include <stdio.h>
#include <stdlib.h>

#define WHO "server"

static char memory[4096];

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
                        RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY, &mr);
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
  if (!dp_next_req(WHO, ep, NULL, &req) && !dp_accept(WHO, &req, desc, sizeof(desc), &conn) &&
      !dp_wait_closed(WHO, "client", &conn)) {
    printf("%s: what landed in my memory: \"%.*s\"\n", WHO, (int)sizeof(memory), memory);
    failed = memory[0] == '\0';
    if (failed) printf("%s: nothing was written\n", WHO);
  }

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
