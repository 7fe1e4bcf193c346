/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * protocol.h -- the receive-CQ example's protocol: ROUNDS times, the client
 * sends "message i" and the server answers with it in capitals. Both sides
 * give their connection a receive CQ (rpma_conn_cfg_set_rcq_size), so sends
 * complete on the connection's CQ and receives on its RCQ, each waited for
 * on its own fd.
 */

#ifndef RCQ_EXAMPLE_PROTOCOL_H
#define RCQ_EXAMPLE_PROTOCOL_H

#define ROUNDS 3
#define SLOT 64          /* bytes per message */
#define RECV_OFFSET 0    /* where each side receives */
#define SEND_OFFSET SLOT /* where each side sends from */
#define REGION (2 * SLOT)

#endif /* RCQ_EXAMPLE_PROTOCOL_H */
