// What a shared receive queue holds: the provider's SRQ and, optionally, the
// receive CQ its receives complete on (with a completion channel of its own).
#pragma once

#include "arpma/result.hpp"
#include "core/asio.hpp"
#include "core/conn_state.hpp"
#include "core/mr_state.hpp"
#include "core/peer_state.hpp"
#include "core/watchers.hpp"
#include "provider/provider.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <system_error>

namespace arpma::detail {

/// librpma's struct rpma_srq. Shared by its handle and by every connection
/// whose QP receives from it; the last one to let go destroys it: pending
/// C++ receives (aborted), RCQ (and its channel), then the SRQ. It keeps its
/// peer's PD alive.
struct srq_state : std::enable_shared_from_this<srq_state> {
  explicit srq_state(std::shared_ptr<peer_state> p) noexcept : peer(std::move(p)) {}
  srq_state(const srq_state&) = delete;
  srq_state& operator=(const srq_state&) = delete;
  ~srq_state() { (void)destroy(); }

  /// rpma_srq_new: the SRQ (max_sge 1), then an armed RCQ of `rcq_size`
  /// entries on the peer's device unless 0; nothing is left on failure.
  static result<std::shared_ptr<srq_state>> create(std::shared_ptr<peer_state> p,
                                                   std::uint32_t rq_size, std::uint32_t rcq_size);
  /// RCQ, then SRQ; returns the first error, always finishes.
  std::error_code destroy() noexcept;
  /// One receive into [offset, offset + len) of `dst` (a null `dst` with
  /// both 0: an empty receive); ranges checked as the connection's.
  std::error_code post_recv(const local_mr_state* dst, std::size_t offset, std::size_t len,
                            std::uint64_t wr_id) const;

  [[nodiscard]] provider::provider& prov() const noexcept { return peer->prov; }
  /// The C++ receives' dispatcher on the RCQ (srq::async_recv), made on
  /// first use; needs `ex` and an RCQ.
  class cq_dispatcher& completions();

  std::shared_ptr<peer_state> peer;
  asio::any_io_executor ex;  ///< empty unless made with one (srq::create(ex, ...))
  std::shared_ptr<class cq_dispatcher> dispatcher;
  /// Waits on the RCQ (cq::async_wait), told when it goes.
  watcher_list waiters;
  provider::srq* srq = nullptr;
  cq_state rcq;  ///< no CQ when the SRQ has no RCQ
};

/// The SRQ's own RCQ, if it has one (and is not closed).
[[nodiscard]] inline const cq_state* queue_of(const srq_state* srq) noexcept {
  return srq != nullptr && srq->peer && srq->rcq.cq != nullptr ? &srq->rcq : nullptr;
}

}  // namespace arpma::detail
