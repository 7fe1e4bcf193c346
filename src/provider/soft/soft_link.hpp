// The link of a soft cm id: the TCP connection that carries its frames.
// Sending (framing, the writer, acknowledgements: soft_link_tx.cpp) may run on
// any thread under the id's tx_mutex; receiving (the frame pump, RNR waits,
// frame deadlines: soft_link_rx.cpp; large payloads placed as they arrive:
// soft_link_place.cpp) under its rx_mutex, on the progress thread
// or on an application thread polling a CQ. The connection manager
// (soft_cm.cpp) drives the link's life.
#pragma once

#include "provider/soft/soft_id.hpp"

#include <cstdint>

namespace arpma::provider::soft_link {

/// What the receiver does after a frame.
enum class rx_next : std::uint8_t {
  more,       ///< go on
  stop,       ///< the link is closed, or reading is paused
  hand_over,  ///< application thread: leave this (unconsumed) to the progress thread
};

/// Closes everything the id has on the wire; idempotent.
void close_link(const id_ptr& id);

/// The connection is over: the QP's outstanding work completes with
/// WR_FLUSH_ERR (verbs' error state). Called with the id's mutex held.
void flush_qp_locked(soft_id& id);

/// The link broke (EOF, reset, a write error, or a frame we do not accept):
/// tell the application what rdma_cm would, then close the link.
void link_failed(const id_ptr& id, int err);

/// Sends a frame on the id's link, from any thread, in order with every frame
/// sent before; dropped when the link is not open or is half-closed. An ACK
/// is only counted: it rides along with the next frame (a reply usually
/// follows at once) or goes out at the next flush_acks. With `batch` (a
/// request behind one awaiting its response) a small frame may wait for the
/// next flush point, at most an ack tick (soft_link_tx.cpp, "Batching").
void send_frame(const id_ptr& id, frame f, byte_span tail = {},
                const soft_dp::payload_source& source = {}, bool batch = false);

/// Sends the requests batched on the link now.
void flush_batch(const id_ptr& id);

/// Sends the acknowledgements still pending, alone.
void flush_acks(const id_ptr& id);

/// Makes sure acknowledgements left pending go out within a millisecond.
void ensure_ack_ticker(const id_ptr& id);

/// Half-closes the link once the queued frames are out; the read side runs
/// until the peer closes too. With `bounded`, the link is closed after the
/// linger timeout whatever the peer does (for ids nobody owns any more).
void finish_link(const id_ptr& id, bool bounded);

/// The link is open for frames from any thread (after connect or accept).
void open_tx(soft_id& id);

/// The QP of an id that just became established can carry data. Called with
/// the id's mutex held.
void qp_ready_locked(const id_ptr& id);

/// The id's socket on the progress thread's reactor (put back there if a
/// lease took it off). Progress thread only.
tcp::socket& reactor_socket(soft_id& id);

/// Registers the socket with the progress thread's reactor afresh, for
/// reading only: Asio keeps EPOLLOUT in a registration once an operation
/// waited for writability (a connect did), and an edge-triggered epoll then
/// reports the writable socket again at every re-arm for reading, a spurious
/// wake-up per wait. Nothing may be pending on the socket. Progress thread only.
void watch_for_reading_only(soft_id& id, const tcp& protocol);

/// Ends the lease a poller holds on the link and reads it on the progress
/// thread again: the link is finishing, and only that thread sees it out.
void end_lease(const id_ptr& id);

/// The progress thread's receiver: runs until the socket is drained, then
/// waits for it to become readable again.
void pump(const id_ptr& id);

/// Starts the receiver of a link whose peer waits for this side's frame (a
/// REQ just sent, a REP to come) and so has sent nothing yet: its first wait,
/// without pump's read, which could only find EAGAIN (the wait's re-arm
/// reports a socket that is readable already). Progress thread only.
void await_peer(const id_ptr& id);

/// An application thread polling a CQ moves its link's frames itself; what
/// it cannot finish goes to the progress thread. `how` (soft_dp::drive):
/// poll also takes the lease on the link, release ends it instead.
void pump_from_application(const id_ptr& id, soft_dp::drive how);

}  // namespace arpma::provider::soft_link
