// arpma::conn_cfg: the shape of a connection, librpma's defaults built in.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

namespace arpma {

namespace detail {
struct srq_state;
struct comp_channel_state;
}  // namespace detail

/// Connection configuration (value type). Defaults are librpma 1.3's.
struct conn_cfg {
  static constexpr std::chrono::milliseconds default_timeout{1000};
  static constexpr std::uint32_t default_queue_size = 10;

  /// Address and route resolution deadline, each phase. 0 = no deadline of
  /// arpma's own (the provider's rules apply); negative is invalid.
  std::chrono::milliseconds timeout = default_timeout;
  std::uint32_t cq_size = default_queue_size;  ///< main CQ depth
  std::uint32_t rcq_size = 0;                  ///< receive CQ depth; 0 = none
  std::uint32_t sq_size = default_queue_size;  ///< QP max_send_wr
  std::uint32_t rq_size = default_queue_size;  ///< QP max_recv_wr
  /// One completion channel for CQ and RCQ instead of one each.
  bool shared_completion_channel = false;
  /// The shared receive queue the QP receives from (srq::attach_to); none
  /// by default. Not owning, as librpma's cfg: the srq must be alive when a
  /// request is made with this cfg (else errc::invalid_argument, never a
  /// dangling reference); each connection made then shares its ownership, so
  /// the SRQ outlives them. When it has an RCQ of its own, receives complete
  /// there and the connection gets no RCQ (rcq_size is ignored); that RCQ
  /// with a shared completion channel is errc::invalid_argument.
  std::weak_ptr<const detail::srq_state> srq{};
  /// A completion channel shared with other connections on one io_context
  /// (completion_channel::attach_to); none by default: the connection's CQs
  /// get channels of their own. Not owning, as `srq`. C++ connections only.
  std::weak_ptr<detail::comp_channel_state> completion_channel{};

  /// Every field equal; `srq` and `completion_channel` name the same object
  /// (or both none).
  friend bool operator==(const conn_cfg& a, const conn_cfg& b) noexcept {
    return a.timeout == b.timeout && a.cq_size == b.cq_size && a.rcq_size == b.rcq_size &&
           a.sq_size == b.sq_size && a.rq_size == b.rq_size &&
           a.shared_completion_channel == b.shared_completion_channel &&
           same_object(a.srq, b.srq) && same_object(a.completion_channel, b.completion_channel);
  }

 private:
  template <class T>
  static bool same_object(const std::weak_ptr<T>& a, const std::weak_ptr<T>& b) noexcept {
    return !a.owner_before(b) && !b.owner_before(a);
  }
};

}  // namespace arpma
