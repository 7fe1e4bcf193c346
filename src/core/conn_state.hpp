// What a connection request and then its connection own, the events they
// receive, and the order in which they let go.
#pragma once

#include "arpma/connection.hpp"
#include "core/cm_channel.hpp"
#include "core/mr_state.hpp"
#include "core/peer_state.hpp"
#include "core/watchers.hpp"
#include "provider/provider.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <system_error>
#include <vector>

namespace arpma {
struct conn_cfg;
}

namespace arpma::detail {

class cq_waiter;  // cq.cpp
/// The CQ goes: its waiter ends what waits (aborted) and lets go of the fd.
void retire(cq_waiter& waiter) noexcept;

/// One CQ and, unless the channel is shared, the completion channel it owns.
struct cq_state {
  provider::cq* cq = nullptr;
  provider::comp_channel* own_channel = nullptr;
  /// cq::async_wait's, made by the first wait and kept with the CQ (so later
  /// waits allocate nothing); mutable: the CQ is reached through const views.
  mutable std::shared_ptr<cq_waiter> waiter;
};

/// rpma_cq_new: a channel of its own unless `shared` is given, the CQ (size
/// clipped to INT_MAX), then armed; nothing is left behind on failure.
std::error_code make_cq(provider::provider& prov, provider::device* dev, std::uint32_t size,
                        provider::comp_channel* shared, cq_state& out);
/// Destroys the CQ, then its own channel; returns the first error.
std::error_code destroy_cq(provider::provider& prov, cq_state& c) noexcept;

struct srq_state;
struct comp_channel_state;
struct conn_state;

/// The one difference between the C and the C++ flavour of a connection: where
/// its cm events go and where its operations complete. Chosen when its C++
/// object is made (async_connect, an endpoint's incoming request: `async`) and
/// kept; a request made either way may be connected either way, so until then
/// and after the state is destroyed it is `blocking` (the C calls read the
/// channels themselves).
class flavour {
 public:
  /// The C++ object's executor, or null: no handler is ever run for this state.
  [[nodiscard]] virtual const asio::any_io_executor* async_executor(
      const conn_state& state) const noexcept = 0;
  /// The io_context of the C++ object, or an empty executor.
  [[nodiscard]] virtual asio::any_io_executor loop(const conn_state& state) const = 0;
  /// Starts delivering the id's events (again after the id moved, or to a new executor).
  virtual void route_events(conn_state& state) const = 0;
  /// Stops delivering them (the id moves or goes).
  virtual void stop_events(conn_state& state) const noexcept = 0;

  /// Events read by the C calls, no executor.
  static const flavour& blocking() noexcept;
  /// Events queued in the state's inbox on its executor, where handlers run.
  static const flavour& async() noexcept;

 protected:
  flavour() = default;
  ~flavour() = default;
};

/// Where an id is in its life; decides what teardown must say to the peer.
enum class conn_phase : std::uint8_t {
  request,     ///< resolved (active) or received (passive), not yet connected
  connecting,  ///< connect/accept called, ESTABLISHED not seen
  connected,   ///< ESTABLISHED seen
  refused,     ///< an incoming request rejected by the application
};

/// A request under construction, complete, connecting or connected: one cm
/// id, its queues and its events. `destroy` unwinds whatever exists, in
/// reverse: QP, RCQ, CQ (each with its own channel), shared channel, then the
/// id — rejected first if it is an incoming request nobody accepted.
///
/// In the C++ flavour the state is attached to its channel as the sink of its
/// token, so events queue in `inbox` until an operation takes them; in the C
/// flavour nothing is attached and the C calls read the channel directly
/// (`flavour`).
struct conn_state final : cm_event_sink {
  conn_state(std::shared_ptr<peer_state> p, std::shared_ptr<cm_channel> ch,
             std::uint64_t tok) noexcept
      : peer(std::move(p)), cm_events(std::move(ch)), token(tok) {}
  conn_state(const conn_state&) = delete;
  conn_state& operator=(const conn_state&) = delete;
  ~conn_state() { (void)destroy(); }

  [[nodiscard]] provider::provider& prov() const noexcept { return peer->prov; }

  /// Creates CQ, RCQ (when cfg asks) and the QP on the id's device (librpma's order);
  /// with cfg.srq the QP receives from it (and into its RCQ, if it has one,
  /// instead of an RCQ of the connection's).
  std::error_code build_queues(const conn_cfg& cfg);
  /// Takes `common` as the channel of both CQs, if it is on this id's
  /// device and io_context (errc::invalid_argument otherwise).
  std::error_code join_attached_comp_channel(comp_channel_state& common, provider::device* dev);
  /// Releases everything; returns the first error, always finishes.
  std::error_code destroy() noexcept;

  /// Becomes the C++ flavour: this id's events go to `inbox`, handled on `ex`
  /// (again when it is already: `ex` may have changed).
  void attach();
  /// Moves the id to `to` (rdma_migrate_id), keeping its token and flavour.
  std::error_code move_to(std::shared_ptr<cm_channel> to);

  /// connect (active) or accept (passive) with `pdata`; no event is awaited.
  std::error_code start_connect(const void* pdata, std::uint8_t len);
  /// Takes what an event says about this connection (private data of
  /// ESTABLISHED, the phase, the end of the connection).
  void note(const provider::cm_event& event);

  void on_cm_event(const provider::cm_event& event) override;
  /// The C++ data path's completion dispatcher, made on first use.
  class cq_dispatcher& completions();
  void watch(const std::shared_ptr<conn_watcher>& w) { watchers_.add(w); }
  void unwatch(const conn_watcher* w) noexcept { watchers_.remove(w); }
  /// Told, as every watcher, when the state is destroyed.
  [[nodiscard]] watcher_list& waiters() noexcept { return watchers_; }

  /// The io_context of the C++ object, or an empty executor (C flavour).
  [[nodiscard]] asio::any_io_executor loop() const { return flavour_->loop(*this); }
  [[nodiscard]] const flavour& how() const noexcept { return *flavour_; }

  std::shared_ptr<peer_state> peer;
  /// The rdma_cm event channel the id's events arrive on.
  std::shared_ptr<cm_channel> cm_events;
  /// The C++ object's executor: its data path and handlers run there.
  asio::any_io_executor ex;
  std::uint64_t token;
  provider::cm_id* id = nullptr;
  bool passive = false;
  conn_phase phase = conn_phase::request;
  bool has_qp = false;
  /// The one completion channel of both CQs (conn_cfg::shared_completion_channel,
  /// librpma's "shared channel"), owned by the connection.
  provider::comp_channel* conn_comp_channel = nullptr;
  /// An arpma::completion_channel shared with other connections
  /// (conn_cfg::completion_channel) both CQs are on; then neither CQ has a
  /// channel of its own.
  std::shared_ptr<comp_channel_state> attached_comp_channel;
  cq_state cq;
  cq_state rcq;
  /// The SRQ the QP receives from, kept alive while the QP uses it.
  std::shared_ptr<const srq_state> srq;
  /// The peer's private data: of CONNECT_REQUEST (passive) or ESTABLISHED (active).
  std::vector<std::uint8_t> private_data;
  /// The peer places writes directly in persistent memory (its peer cfg).
  std::atomic<bool> direct_write_to_pmem{false};
  /// librpma's flush emulation: 8 bytes read back, registered on first use.
  std::array<std::uint8_t, 8> flush_raw_buffer{};
  std::unique_ptr<local_mr_state> flush_raw;
  std::shared_ptr<class cq_dispatcher> dispatcher;
  bool closed = false;  ///< DISCONNECTED (or a fatal event) seen by the sink
  bool disconnect_sent = false;
  std::deque<provider::cm_event> inbox;

 private:
  const flavour* flavour_ = &flavour::blocking();
  watcher_list watchers_;
};

/// rdma_cm's failure events as error codes (REJECTED → connection_refused,
/// UNREACHABLE → host_unreachable, ...); success for any other event.
[[nodiscard]] std::error_code connect_failure(const provider::cm_event& event) noexcept;

/// librpma's mapping of an rdma_cm event (docs/compatibility.md); undefined when none.
[[nodiscard]] conn_event to_conn_event(provider::cm_event_type type) noexcept;

/// rdma_disconnect, once; nothing when the connection is already closed.
std::error_code request_disconnect(conn_state& state) noexcept;

/// The executor of the C++ object a state serves; null for no state and for
/// the C flavour, whose calls read its channels directly.
[[nodiscard]] inline const asio::any_io_executor* async_executor_of(
    const conn_state* state) noexcept {
  return state != nullptr ? state->how().async_executor(*state) : nullptr;
}

/// The connection's CQ (or, with `receive`, its RCQ) if it has one.
[[nodiscard]] inline const cq_state* queue_of(const conn_state* state, bool receive) noexcept {
  if (state == nullptr) return nullptr;
  const auto& q = receive ? state->rcq : state->cq;
  return q.cq != nullptr ? &q : nullptr;
}

}  // namespace arpma::detail
