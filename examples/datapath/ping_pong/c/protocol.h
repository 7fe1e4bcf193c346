/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * protocol.h -- the ping-pong examples' protocol in C (the same numbers as
 * ../protocol.hpp): the client sends "ping i" for i = 1..ROUNDS, round 2 with
 * send_with_imm (immediate data i), round 3 with write_with_imm (the text
 * lands in the server's region at WRITE_OFFSET, immediate data i), the
 * others with a plain send; the server answers each with a send of "pong i".
 */

#ifndef PING_PONG_PROTOCOL_H
#define PING_PONG_PROTOCOL_H

#define ROUNDS 4
#define SEND_WITH_IMM_ROUND 2
#define WRITE_WITH_IMM_ROUND 3

#define SERVER_SIZE 1024
#define RECV_OFFSET 0
#define WRITE_OFFSET 256
#define PONG_OFFSET 512
#define CLIENT_SIZE 128
#define CLIENT_RECV_OFFSET 0
#define PING_OFFSET 64
#define MESSAGE_MAX 64

#include "../../common.h"

#include <librpma.h>

#include <stdio.h>

/*
 * Sends and receives complete on the same CQ, in whatever order the peer's
 * answers bring them: waits until the *sends signaled sends (and writes)
 * still outstanding have completed and, when recv_wc is not NULL, one
 * receive has (its completion stored there). 0 or -1 (reported).
 */
static inline int wait_for(const char* who, struct rpma_cq* cq, int* sends,
                           struct ibv_wc* recv_wc) {
  int need_recv = recv_wc != NULL;
  while (*sends > 0 || need_recv) {
    struct ibv_wc wc;
    if (dp_wait_wc(who, need_recv ? "waiting for a message" : "sending", cq, &wc)) return -1;
    if (wc.opcode & IBV_WC_RECV) { /* IBV_WC_RECV, IBV_WC_RECV_RDMA_WITH_IMM */
      if (!need_recv) {
        printf("%s: a message nobody waited for\n", who);
        return -1;
      }
      *recv_wc = wc;
      need_recv = 0;
    } else {
      --*sends;
    }
  }
  return 0;
}

#endif /* PING_PONG_PROTOCOL_H */
