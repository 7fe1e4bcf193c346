/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * common_rcq.h -- what both sides of the receive-CQ example do: a
 * connection configuration with a receive CQ, and a send followed by the
 * wait for its completion on the connection's (send) CQ.
 */

#ifndef RCQ_EXAMPLE_COMMON_RCQ_H
#define RCQ_EXAMPLE_COMMON_RCQ_H

#include "../../common.h"
#include "../protocol.h"

#include <librpma.h>

#include <stdio.h>
#include <string.h>

/* A configuration whose connections get a receive CQ of ROUNDS entries. */
static inline int rcq_cfg_new(const char* who, struct rpma_conn_cfg** cfg_ptr) {
  int ret = rpma_conn_cfg_new(cfg_ptr);
  if (ret) return dp_fail(who, "rpma_conn_cfg_new", ret);
  ret = rpma_conn_cfg_set_rcq_size(*cfg_ptr, ROUNDS);
  if (ret) {
    (void)rpma_conn_cfg_delete(cfg_ptr);
    return dp_fail(who, "rpma_conn_cfg_set_rcq_size", ret);
  }
  return 0;
}

/* Sends the text at SEND_OFFSET and waits for the send's completion, which
 * comes on the connection's CQ, never on its RCQ. */
static inline int rcq_send(const char* who, struct rpma_conn* conn, struct rpma_mr_local* mr,
                           const char* text) {
  int ret = rpma_send(conn, mr, SEND_OFFSET, strlen(text) + 1, RPMA_F_COMPLETION_ALWAYS, NULL);
  if (ret) return dp_fail(who, "rpma_send", ret);
  struct rpma_cq* cq = NULL;
  if ((ret = rpma_conn_get_cq(conn, &cq))) return dp_fail(who, "rpma_conn_get_cq", ret);
  struct ibv_wc wc = {0};
  if (dp_wait_wc(who, "send", cq, &wc)) return -1;
  printf("%s: sent \"%s\", its completion came on the CQ\n", who, text);
  return 0;
}

/* Waits for the next receive's completion on the connection's RCQ. */
static inline int rcq_wait_recv(const char* who, struct rpma_conn* conn, struct ibv_wc* wc) {
  struct rpma_cq* rcq = NULL;
  int ret = rpma_conn_get_rcq(conn, &rcq);
  if (ret || rcq == NULL) return dp_fail(who, "rpma_conn_get_rcq", ret ? ret : RPMA_E_INVAL);
  return dp_wait_wc(who, "receive", rcq, wc);
}

#endif /* RCQ_EXAMPLE_COMMON_RCQ_H */
