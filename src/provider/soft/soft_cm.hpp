// The soft provider's connection manager: the IB CM handshake (REQ, REP, REJ,
// RTU, DREQ) over a link, both sides, and what destroying an id sends.
// Everything here runs on the progress thread unless it says otherwise.
#pragma once

#include "provider/provider.hpp"
#include "provider/soft/soft_id.hpp"
#include "provider/soft/soft_link.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace arpma::provider::soft_cm {

namespace asio = boost::asio;
using soft_link::conn_state;
using soft_link::id_ptr;
using soft_link::tcp;
using soft_wire::frame;
using soft_wire::frame_type;

/// The IB CM reject reason of a consumer's reject (and of an unanswered request).
inline constexpr std::uint16_t rej_consumer_defined = 28;

/// A REQ or REP frame (any thread).
[[nodiscard]] frame make_conn_frame(frame_type type, const conn_param& param, std::uint32_t qp_num);
/// A REJ frame (any thread).
[[nodiscard]] frame make_rej_frame(std::uint16_t reason, const void* private_data, std::size_t len);

/// Private data within the limit, and present if it has a length (any thread).
[[nodiscard]] bool private_data_ok(const void* data, std::uint8_t len, std::uint8_t max) noexcept;

/// A complete, well-formed CM frame on an id's link (the receiver hands it over).
soft_link::rx_next on_cm_frame(const id_ptr& id, frame_type type,
                               std::span<const std::uint8_t> payload);

/// The passive side's answer is out: an RTU that does not come within the
/// handshake deadline fails the link (UNREACHABLE, as an IB REP timeout), so a
/// peer cannot keep an accepted id half-open for ever.
void await_rtu(const id_ptr& id);

/// Low latency, and a dead peer host noticed within seconds: TCP_NODELAY and keepalive (5 s
/// idle, then 5 probes 1 s apart) on a link's socket, or on a listener, whose accepted
/// sockets inherit them.
void tune(int fd) noexcept;

/// A listening id accepts links, each bounded until its REQ (limits).
void accept_next(const id_ptr& listener);

/// The active side: TCP connect (bounded), then the REQ `request`.
void start_connect(const id_ptr& id, const tcp::endpoint& peer, frame request);

/// The progress thread's part of destroy_id, given the state the id was in:
/// what rdma_cm's destroy would send, then the link closes (bounded).
void teardown(const id_ptr& id, conn_state state, bool peer_gone);

}  // namespace arpma::provider::soft_cm
