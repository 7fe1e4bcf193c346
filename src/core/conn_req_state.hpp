// What a connection request owns, and the order in which it lets go.
#pragma once

#include "core/cm_channel.hpp"
#include "core/peer_state.hpp"
#include "provider/provider.hpp"

#include <memory>
#include <system_error>

namespace arpma {
struct conn_cfg;
}

namespace arpma::detail {

/// One CQ and, unless the channel is shared, the completion channel it owns.
struct cq_state {
  provider::cq* cq = nullptr;
  provider::comp_channel* own_channel = nullptr;
};

/// A request under construction or complete. Filled step by step by the
/// operation that builds it; `destroy` unwinds whatever exists, in reverse:
/// QP, RCQ, CQ (each with its own channel), shared channel, then the id.
struct conn_req_state {
  conn_req_state(std::shared_ptr<peer_state> p, std::shared_ptr<cm_channel> ch,
                 std::uint64_t tok) noexcept
      : peer(std::move(p)), channel(std::move(ch)), token(tok) {}
  conn_req_state(const conn_req_state&) = delete;
  conn_req_state& operator=(const conn_req_state&) = delete;
  ~conn_req_state() { (void)destroy(); }

  [[nodiscard]] provider::provider& prov() const noexcept { return peer->prov; }

  /// Creates CQ, RCQ (when cfg asks) and the QP on the id's device (§3.4).
  std::error_code build_queues(const conn_cfg& cfg);
  /// Releases everything; returns the first error, always finishes.
  std::error_code destroy() noexcept;

  std::shared_ptr<peer_state> peer;
  std::shared_ptr<cm_channel> channel;
  std::uint64_t token;
  provider::cm_id* id = nullptr;
  bool passive = false;
  bool has_qp = false;
  provider::comp_channel* shared_channel = nullptr;
  cq_state cq;
  cq_state rcq;
};

}  // namespace arpma::detail
