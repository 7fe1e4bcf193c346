/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * protocol.h -- the SRQ example's protocol, for the C and C++ flavours: the
 * client opens CONNECTIONS connections one after another, then sends
 * "hello from connection i" on connection i (0-based) and disconnects them
 * all; the server receives every message from one shared receive queue and
 * its receive CQ, without a receive posted on any connection. Plain
 * constants, for C and C++ alike.
 */

#ifndef SRQ_EXAMPLE_PROTOCOL_H
#define SRQ_EXAMPLE_PROTOCOL_H

#define CONNECTIONS 3
#define SLOT 64 /* bytes per message, in both sides' regions */
#define MESSAGE_FORMAT "hello from connection %d"

#endif /* SRQ_EXAMPLE_PROTOCOL_H */
