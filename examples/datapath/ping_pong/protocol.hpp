// The ping-pong examples' protocol, shared by the C++ flavours (the C
// flavour spells the same numbers out in c/protocol.h). The client sends
// "ping i" for i = 1..rounds, each a different way; the server answers each
// with a send of "pong i". Every message is NUL-terminated text.
#pragma once

#include <cstddef>

namespace ping_pong {

inline constexpr int rounds = 4;
// How the client sends ping i: round 2 with send_with_imm (immediate data
// i), round 3 with write_with_imm (the text lands in the server's region at
// write_offset, immediate data i), the others with a plain send.
inline constexpr int send_with_imm_round = 2;
inline constexpr int write_with_imm_round = 3;

// The server's region: a receive buffer, the write_with_imm target, the
// pong being sent.
inline constexpr std::size_t server_size = 1024;
inline constexpr std::size_t recv_offset = 0;
inline constexpr std::size_t write_offset = 256;
inline constexpr std::size_t pong_offset = 512;
// The client's region: a receive buffer for the pong, the ping being sent.
inline constexpr std::size_t client_size = 128;
inline constexpr std::size_t client_recv_offset = 0;
inline constexpr std::size_t ping_offset = 64;
inline constexpr std::size_t message_max = 64;

}  // namespace ping_pong
