// Placing a large frame's payload straight where it belongs (a WRITE's
// target, the receive a SEND completes, the buffer of the READ a response
// answers) as it arrives, instead of through the link's receive buffer: one
// copy, the kernel's, as a NIC's DMA. Private to the receiver
// (soft_link_rx.cpp), whose loop (pump_locked) starts a placement once a
// frame's header and fixed part are buffered and reads on through
// place_more until the payload is all in; soft_link_place.cpp.
#pragma once

#include "provider/soft/soft_link.hpp"
#include "provider/soft/soft_wire.hpp"

#include <cstddef>
#include <cstdint>

namespace arpma::provider::soft_link {

/// What a non-blocking read of the link got.
enum class fill_result : std::uint8_t { data, would_block, failed };

/// Bytes the link's socket holds unread (FIONREAD); 0 when it is closed.
std::size_t socket_holds(soft_id& id);

/// What of a placeable frame precedes its payload: a WRITE's target, a SEND
/// WITH IMMEDIATE's immediate.
std::size_t fixed_part(soft_wire::frame_type type) noexcept;

/// A WRITE, SEND or READ response large enough to be placed.
bool placeable(const soft_wire::frame_header& h) noexcept;

/// Starts placing the frame whose header and fixed part are at the front of
/// the buffer (nothing after them but payload); false when it is not
/// eligible (the ordinary path then buffers it, and refuses it if it must).
/// Called with rx_mutex held.
bool start_placing(const id_ptr& id, const soft_wire::frame_header& h);

/// Reads what the socket holds of the payload being placed, and completes
/// the frame once it is all in. Called with rx_mutex held.
fill_result place_more(const id_ptr& id);

}  // namespace arpma::provider::soft_link
