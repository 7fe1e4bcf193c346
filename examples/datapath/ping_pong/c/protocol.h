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

#endif /* PING_PONG_PROTOCOL_H */
