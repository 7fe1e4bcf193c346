/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client.c -- write + flush example, C flavour (librpma's API only): the
 * client. Connects, decodes the server's region from the accept's private
 * data, writes a message into it and flushes that range to global
 * visibility, as librpma's examples/04-write-to-persistent does (with
 * RPMA_FLUSH_TYPE_VISIBILITY: plain DRAM here). The write asks for a
 * completion only on error; the flush's completion says both are done: the
 * message is in the server's memory. Then it disconnects.
 *
 * usage: write_flush_c_client <addr> <port>
 */

#include "../../common.h"

#include <librpma.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHO "client"
#define MESSAGE "hello from the client, written and flushed"

static char buf[64] = MESSAGE;

/* Writes and flushes the message: 0 or -1. */
static int write_and_flush(struct rpma_conn* conn, struct rpma_mr_remote* remote,
                           struct rpma_mr_local* mr) {
  const size_t len = sizeof(MESSAGE); /* with its NUL */
  printf("%s: writing \"%s\" (%zu bytes) to offset 0 of the server's region\n", WHO, buf, len);
  int ret = rpma_write(conn, remote, 0, mr, 0, len, RPMA_F_COMPLETION_ON_ERROR, NULL);
  if (ret) return dp_fail(WHO, "rpma_write", ret);
  ret =
      rpma_flush(conn, remote, 0, len, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS, NULL);
  if (ret) return dp_fail(WHO, "rpma_flush", ret);

  struct rpma_cq* cq = NULL;
  ret = rpma_conn_get_cq(conn, &cq);
  if (ret) return dp_fail(WHO, "rpma_conn_get_cq", ret);
  struct ibv_wc wc;
  if (dp_wait_wc(WHO, "writing and flushing", cq, &wc)) return -1;
  printf("%s: flushed: the message is visible in the server's memory\n", WHO);
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
  int ret = rpma_mr_reg(peer, buf, sizeof(buf), RPMA_MR_USAGE_WRITE_SRC, &mr);
  if (ret) {
    dp_fail(WHO, "rpma_mr_reg", ret);
    goto out_peer_delete;
  }

  printf("%s: connecting to %s:%s\n", WHO, addr, port);
  struct rpma_conn* conn = NULL;
  if (dp_connect(WHO, peer, addr, port, NULL, &conn)) goto out_mr_dereg;
  struct rpma_mr_remote* remote = NULL;
  if (!dp_server_region(WHO, conn, &remote)) {
    failed = write_and_flush(conn, remote, mr);
    ret = rpma_mr_remote_delete(&remote);
    if (ret) failed = dp_fail(WHO, "rpma_mr_remote_delete", ret);
  }
  if (dp_disconnect(WHO, &conn)) failed = 1;

out_mr_dereg:
  ret = rpma_mr_dereg(&mr);
  if (ret) failed = dp_fail(WHO, "rpma_mr_dereg", ret);
out_peer_delete:
  ret = rpma_peer_delete(&peer);
  if (ret) failed = dp_fail(WHO, "rpma_peer_delete", ret);
  printf("%s: %s\n", WHO, failed ? "FAILED" : "done");
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
