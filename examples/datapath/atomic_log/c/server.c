/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server.c -- atomic log example, C flavour (librpma's API only): the
 * server. Its region holds a log: at offset 0 the tail (a little-endian
 * 8-byte offset: where the next record goes), records (NUL-terminated text)
 * from offset 64. It starts empty (tail 64), sends the region's descriptor in
 * the accept's private data, and once the client has disconnected prints the
 * log: every record up to the tail.
 *
 * usage: atomic_log_c_server <addr> <port>
 */

#define _POSIX_C_SOURCE 200809L /* strnlen */

#include "../../common.h"

#include <librpma.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHO "server"
#define LOG_START 64

/* The tail's address must be 8-byte aligned (the atomic write's target),
 * not only its offset: a char array by itself may sit anywhere. */
static _Alignas(64) char memory[4096];

/* Prints the records in [LOG_START, tail): 0, or -1 when the tail is corrupt
 * or the log empty. */
static int print_log(void) {
  uint64_t tail = 0;
  memcpy(&tail, memory, sizeof(tail)); /* little-endian hosts, as librpma's examples */
  if (tail < LOG_START || tail > sizeof(memory)) {
    printf("%s: the tail (%" PRIu64 ") is outside the log\n", WHO, tail);
    return -1;
  }
  int records = 0;
  for (uint64_t at = LOG_START; at < tail; ++records) {
    size_t len = strnlen(memory + at, tail - at);
    printf("%s: record at offset %" PRIu64 ": \"%.*s\"\n", WHO, at, (int)len, memory + at);
    at += len + 1;
  }
  printf("%s: the log holds %d records, tail at offset %" PRIu64 "\n", WHO, records, tail);
  return records > 0 ? 0 : -1;
}

int main(int argc, char* argv[]) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* each line visible at once, also in a pipe */
  const char* addr = NULL;
  const char* port = NULL;
  if (parse_args(argc, argv, &addr, &port, NULL)) return 2;

  const uint64_t empty = LOG_START;
  memcpy(memory, &empty, sizeof(empty));
  struct rpma_peer* peer = NULL;
  if (dp_peer_new(WHO, addr, 1, &peer)) return EXIT_FAILURE;
  int failed = 1;
  struct rpma_mr_local* mr = NULL;
  int ret = rpma_mr_reg(
      peer, memory, sizeof(memory),
      RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY, &mr);
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
  printf("%s: an empty log, tail at offset %d\n", WHO, LOG_START);

  struct rpma_conn_req* req = NULL;
  struct rpma_conn* conn = NULL;
  if (!dp_next_req(WHO, ep, NULL, &req) && !dp_accept(WHO, &req, desc, sizeof(desc), &conn) &&
      !dp_wait_closed(WHO, "client", &conn))
    failed = print_log();

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
