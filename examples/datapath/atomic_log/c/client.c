/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client.c -- atomic log example, C flavour (librpma's API only): the client
 * appends 3 records to the log in the server's memory (layout: see
 * server.c). It reads the tail once; then, for each record: rpma_write it at
 * the tail and rpma_flush it (so it is in the server's memory before the
 * tail points past it), rpma_atomic_write the new tail (8 bytes as one unit:
 * a reader never sees half an offset) and rpma_flush that, as librpma's
 * examples/07-atomic-write does. Writes ask for a completion only on error;
 * each flush's completion says what came before it is done.
 *
 * usage: atomic_log_c_client <addr> <port>
 */

#include "../../common.h"

#include <librpma.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHO "client"
#define RECORDS 3

/* [0, 8): the tail as read; record i from offset 64 * i */
static char buf[64 * (RECORDS + 1)];

/* Posts a flush of [offset, +len) and waits for its completion: 0 or -1. */
static int flush(struct rpma_conn* conn, struct rpma_cq* cq, struct rpma_mr_remote* log,
                 size_t offset, size_t len, const char* what) {
  int ret = rpma_flush(conn, log, offset, len, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS,
                       NULL);
  if (ret) return dp_fail(WHO, "rpma_flush", ret);
  struct ibv_wc wc;
  return dp_wait_wc(WHO, what, cq, &wc);
}

static int append(struct rpma_conn* conn, struct rpma_mr_remote* log, struct rpma_mr_local* mr) {
  struct rpma_cq* cq = NULL;
  int ret = rpma_conn_get_cq(conn, &cq);
  if (ret) return dp_fail(WHO, "rpma_conn_get_cq", ret);
  size_t log_size = 0;
  ret = rpma_mr_remote_get_size(log, &log_size);
  if (ret) return dp_fail(WHO, "rpma_mr_remote_get_size", ret);

  ret = rpma_read(conn, mr, 0, log, 0, 8, RPMA_F_COMPLETION_ALWAYS, NULL);
  if (ret) return dp_fail(WHO, "rpma_read", ret);
  struct ibv_wc wc;
  if (dp_wait_wc(WHO, "reading the tail", cq, &wc)) return -1;
  uint64_t tail = 0;
  memcpy(&tail, buf, sizeof(tail)); /* little-endian hosts, as librpma's examples */
  printf("%s: the log's tail is at offset %" PRIu64 "\n", WHO, tail);

  for (int i = 1; i <= RECORDS; ++i) {
    char* record = buf + 64 * i;
    const size_t len = (size_t)snprintf(record, 64, "record %d of %d", i, RECORDS) + 1;
    if (tail + len > log_size) {
      printf("%s: the log is full\n", WHO);
      return -1;
    }
    ret = rpma_write(conn, log, tail, mr, 64 * (size_t)i, len, RPMA_F_COMPLETION_ON_ERROR, NULL);
    if (ret) return dp_fail(WHO, "rpma_write", ret);
    if (flush(conn, cq, log, tail, len, "writing and flushing the record")) return -1;

    const uint64_t new_tail = tail + len;
    char value[8];
    memcpy(value, &new_tail, sizeof(value));
    ret = rpma_atomic_write(conn, log, 0, value, RPMA_F_COMPLETION_ON_ERROR, NULL);
    if (ret) return dp_fail(WHO, "rpma_atomic_write", ret);
    if (flush(conn, cq, log, 0, 8, "writing and flushing the tail")) return -1;
    printf("%s: appended \"%s\" at offset %" PRIu64 ", tail advanced to %" PRIu64 "\n", WHO, record,
           tail, new_tail);
    tail = new_tail;
  }
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
  int ret =
      rpma_mr_reg(peer, buf, sizeof(buf), RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC, &mr);
  if (ret) {
    dp_fail(WHO, "rpma_mr_reg", ret);
    goto out_peer_delete;
  }

  printf("%s: connecting to %s:%s\n", WHO, addr, port);
  struct rpma_conn* conn = NULL;
  if (dp_connect(WHO, peer, addr, port, NULL, &conn)) goto out_mr_dereg;
  struct rpma_mr_remote* log = NULL;
  if (!dp_server_region(WHO, conn, &log)) {
    failed = append(conn, log, mr);
    ret = rpma_mr_remote_delete(&log);
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
