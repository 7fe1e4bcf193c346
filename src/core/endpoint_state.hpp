// What a listening endpoint owns: its id, its channel, the requests that came
// in and were not handed out yet, and who waits for them.
#pragma once

#include "core/cm_channel.hpp"
#include "core/conn_state.hpp"
#include "core/peer_state.hpp"

#include <deque>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

namespace arpma {
struct conn_cfg;
}

namespace arpma::detail {

struct endpoint_state final : cm_event_sink {
  endpoint_state(std::shared_ptr<peer_state> p, std::shared_ptr<cm_channel> ch,
                 std::uint64_t tok) noexcept
      : peer(std::move(p)), channel(std::move(ch)), token(tok) {}
  endpoint_state(const endpoint_state&) = delete;
  endpoint_state& operator=(const endpoint_state&) = delete;
  ~endpoint_state() { (void)destroy(); }

  [[nodiscard]] provider::provider& prov() const noexcept { return peer->prov; }

  /// The executor given to listen(): its operations and requests run there.
  asio::any_io_executor ex;

  /// Binds and listens (rpma_ep_listen steps 3–6); the id is created here.
  std::error_code listen(const std::string& addr, const std::string& port);
  /// Rejects the requests not handed out, ends the waits, destroys the id.
  std::error_code destroy() noexcept;

  /// C++ flavour: CONNECT_REQUESTs are taken as they arrive.
  void on_cm_event(const provider::cm_event& event) override;
  void watch(const std::shared_ptr<conn_watcher>& w) { watchers_.add(w); }
  void unwatch(const conn_watcher* w) noexcept { watchers_.remove(w); }

  /// C flavour: reads the next event from the endpoint's own channel (blocking
  /// or not, as its fd is) and makes it a request on a channel of its own,
  /// queues built with `cfg`. errc::invalid_argument for an event that is not
  /// a CONNECT_REQUEST (as librpma), errc::no_event when nothing is pending.
  result<std::unique_ptr<conn_state>> next_request_now(const conn_cfg& cfg);

  std::shared_ptr<peer_state> peer;
  std::shared_ptr<cm_channel> channel;
  std::uint64_t token;
  provider::cm_id* id = nullptr;
  std::deque<std::unique_ptr<conn_state>> pending;

 private:
  std::unique_ptr<conn_state> take_request(const provider::cm_event& event,
                                           std::shared_ptr<cm_channel> on);

  watcher_list watchers_;
};

/// The sockaddr to bind for `addr`:`port` (numeric, or a name resolved with
/// AI_PASSIVE), as rpma_info_new(RPMA_INFO_PASSIVE) finds it.
struct bind_address {
  sockaddr_storage storage{};
  [[nodiscard]] const sockaddr* get() const noexcept {
    return reinterpret_cast<const sockaddr*>(&storage);  // NOLINT: the sockaddr API
  }
};
result<bind_address> passive_address(const std::string& addr, const std::string& port);

}  // namespace arpma::detail
