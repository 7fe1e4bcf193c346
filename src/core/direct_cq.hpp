// The C flavour of the completion queues: rpma_cq_wait / _get_wc / _get_fd
// and rpma_conn_wait / _get_compl_fd read a connection's (or an SRQ's) CQ on
// the caller's thread, without a loop, as librpma does. capi calls these;
// which channel a queue's events come on is known here only.
#pragma once

#include "core/completion_of.hpp"
#include "core/conn_state.hpp"
#include "core/srq_state.hpp"
#include "provider/provider.hpp"

#include "arpma/result.hpp"

#include <cstddef>
#include <optional>
#include <span>
#include <system_error>

namespace arpma::detail {

/// One CQ as the C calls use it: a view, valid while its owner lives. Made
/// inline: rpma_cq_get_wc makes one per call.
class direct_cq {
 public:
  /// A connection's CQ (or, with `receive`, its RCQ); none when it has none.
  [[nodiscard]] static std::optional<direct_cq> of(const conn_state* conn, bool receive) noexcept {
    if (conn == nullptr) return std::nullopt;
    const cq_state& q = receive ? conn->rcq : conn->cq;
    if (q.cq == nullptr) return std::nullopt;
    const bool shared = conn->conn_comp_channel != nullptr;
    return direct_cq(conn->prov(), q.cq, shared ? conn->conn_comp_channel : q.own_channel, shared);
  }
  /// An SRQ's own RCQ; none when it has none.
  [[nodiscard]] static std::optional<direct_cq> of(const srq_state* srq) noexcept {
    // An SRQ's RCQ always has a channel of its own.
    if (srq == nullptr || srq->rcq.cq == nullptr) return std::nullopt;
    return direct_cq(srq->prov(), srq->rcq.cq, srq->rcq.own_channel, false);
  }

  /// Reads the CQ's next event from its own channel, acknowledges it and
  /// re-arms the CQ. errc::shared_channel (its events come on the
  /// connection's shared channel: rpma_conn_wait), errc::no_completion
  /// (none pending on a non-blocking fd, or the read failed), errc::provider
  /// (the re-arm failed).
  [[nodiscard]] std::error_code wait() const;
  /// Up to out.size() completions, each converted in place by
  /// `convert(const provider::work_completion&, Out&)`.
  template <class Out, class Convert>
  [[nodiscard]] result<std::size_t> poll(std::span<Out> out, Convert convert) const {
    return poll_converted(*prov_, cq_, out, convert);
  }
  /// The fd its events come on: the shared channel's when there is one.
  [[nodiscard]] int fd() const noexcept;

 private:
  direct_cq(provider::provider& p, provider::cq* cq, provider::comp_channel* channel,
            bool shared) noexcept
      : prov_(&p), cq_(cq), channel_(channel), shared_(shared) {}
  provider::provider* prov_;
  provider::cq* cq_;
  provider::comp_channel* channel_;
  bool shared_;
};

/// rpma_conn_wait: the next event of the connection's shared channel,
/// acknowledged and re-armed; whether it was the RCQ's. errc::invalid_argument
/// (no connection), errc::not_shared_channel, errc::no_completion, errc::unknown
/// (an event of a CQ not the connection's: left unacknowledged, as librpma),
/// errc::provider (the re-arm failed).
[[nodiscard]] result<bool> wait_shared_channel(const conn_state* conn);
/// rpma_conn_get_compl_fd: the shared channel's fd; errc::not_shared_channel
/// without one.
[[nodiscard]] result<int> shared_channel_fd(const conn_state* conn) noexcept;

}  // namespace arpma::detail
