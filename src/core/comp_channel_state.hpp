// A completion channel shared by the CQs of many C++ connections on one
// io_context: one fd watched on the loop, each event routed to the
// dispatcher of the connection whose CQ fired.
#pragma once

#include "arpma/result.hpp"
#include "core/asio.hpp"
#include "core/cm_channel.hpp"
#include "core/op_slot.hpp"
#include "core/peer_state.hpp"
#include "provider/provider.hpp"

#include <cstddef>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

namespace arpma::detail {

class cq_dispatcher;

/// arpma::completion_channel's state. Shared by its handle and by every
/// connection with a CQ on it; destroyed (the channel with it) by the last.
///
/// The fd is watched only while some dispatcher on it has operations
/// pending (`wanting`), so an io_context with nothing to do still runs out
/// of work. On a wake-up every pending event is read, acknowledged and its
/// CQ re-armed before any CQ is drained, then each dispatcher whose CQ fired
/// drains its CQs.
struct comp_channel_state final : std::enable_shared_from_this<comp_channel_state>,
                                  loop_shutdown_listener {
  comp_channel_state(std::shared_ptr<peer_state> p, asio::any_io_executor executor) noexcept
      : peer(std::move(p)), ex(std::move(executor)) {}
  comp_channel_state(const comp_channel_state&) = delete;
  comp_channel_state& operator=(const comp_channel_state&) = delete;
  ~comp_channel_state() { (void)destroy(); }

  /// Creates the provider's channel on the peer's device.
  static result<std::shared_ptr<comp_channel_state>> create(std::shared_ptr<peer_state> p,
                                                            const asio::any_io_executor& ex);
  /// Destroys the provider's channel (no CQ may be left on it).
  std::error_code destroy() noexcept;

  [[nodiscard]] provider::provider& prov() const noexcept { return peer->prov; }
  [[nodiscard]] int fd() const noexcept;
  [[nodiscard]] std::size_t cq_count() const noexcept { return cqs_.size(); }

  /// A CQ made on the channel / about to be destroyed.
  void add_cq(provider::cq* cq);
  void remove_cq(provider::cq* cq) noexcept;
  /// Routes `cq`'s events to `d` (its connection's dispatcher, made later
  /// than the CQ); null unbinds.
  void bind(provider::cq* cq, const std::shared_ptr<cq_dispatcher>& d);

  /// A dispatcher has operations pending / has none any more.
  void want() noexcept;
  void unwant() noexcept;
  /// Makes sure the fd is watched while anyone wants it.
  void watch();

  void abandon() noexcept override;

  std::shared_ptr<peer_state> peer;
  asio::any_io_executor ex;
  provider::comp_channel* native = nullptr;

 private:
  void on_readable();

  struct cq_entry {
    std::weak_ptr<cq_dispatcher> dispatcher;
    bool unarmed = false;  ///< its re-arm failed before a dispatcher was bound
  };
  std::unordered_map<provider::cq*, cq_entry> cqs_;
  op_slot watch_slot_;  ///< the fd wait's storage; declared first, so it outlives fd_
  std::optional<asio::posix::stream_descriptor> fd_;
  std::size_t wanting_ = 0;
  bool waiting_ = false;
  bool abandoned_ = false;
  std::vector<std::shared_ptr<cq_dispatcher>> fired_;  ///< reused between wake-ups
};

}  // namespace arpma::detail
