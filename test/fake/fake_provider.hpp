// A scripted provider for unit tests: real eventfds for readiness, scripted
// rdma_cm events (any type, any order, with delays), any call failing with any
// errno, a log of every call, and checks that objects are destroyed in an
// order rdma-core would accept.
#pragma once

#include "provider/provider.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace arpma::test {

namespace prov = ::arpma::provider;

class fake_provider final : public prov::provider {
 public:
  /// One scripted event: delivered `delay` after the call that triggers it.
  struct response {
    prov::cm_event_type type;
    int status = 0;
    std::chrono::milliseconds delay{0};
  };

  fake_provider();
  ~fake_provider() override;

  // ---- scripting -----------------------------------------------------------
  /// The `nth` call (1-based, counted from now) to `call` fails with `err`.
  void fail(const std::string& call, int err, int nth = 1);
  /// Events each resolve_addr / resolve_route call produces (default: the
  /// matching *_RESOLVED at once). An empty list: the call produces nothing.
  void on_resolve_addr(std::vector<response> events);
  void on_resolve_route(std::vector<response> events);
  /// Queues an event for `id` now, as the provider would.
  void deliver(prov::cm_id* id, prov::cm_event_type type, int status = 0);

  // ---- inspection ----------------------------------------------------------
  /// Every call made, in order ("create_cq", "destroy_id", ...).
  [[nodiscard]] std::vector<std::string> calls() const;
  /// Calls made since the last call to this function.
  [[nodiscard]] std::vector<std::string> take_calls();
  /// Objects created and not yet destroyed (channels, ids, PDs, CQs, QPs).
  [[nodiscard]] std::size_t live_objects() const;
  /// Destroys rdma-core would refuse (in use, unknown, twice); must stay empty.
  [[nodiscard]] std::vector<std::string> violations() const;
  [[nodiscard]] int event_channels_created() const;
  [[nodiscard]] prov::device* device() noexcept { return dev_; }
  /// Ids currently alive, in creation order.
  [[nodiscard]] std::vector<prov::cm_id*> ids() const;
  /// Shape of the QP of `id` (send/recv CQ sizes, caps); nullptr if none.
  struct qp_info {
    int send_cqe = 0;
    int recv_cqe = 0;
    bool same_cq = false;
    bool cqs_armed = false;
    bool shared_comp_channel = false;
    prov::qp_config config;
  };
  [[nodiscard]] std::unique_ptr<qp_info> qp_of(const prov::cm_id* id) const;

  // ---- provider ------------------------------------------------------------
  const char* name() const noexcept override { return "fake"; }
  bool owns(const prov::device* dev) const noexcept override { return dev == dev_; }
  result<prov::device*> find_device(const char* addr, bool remote) override;
  result<prov::event_channel*> create_event_channel() override;
  void destroy_event_channel(prov::event_channel* channel) noexcept override;
  int event_channel_fd(const prov::event_channel* channel) const noexcept override;
  std::error_code get_cm_event(prov::event_channel* channel, prov::cm_event& out) override;
  result<prov::cm_id*> create_id(prov::event_channel* channel, std::uint64_t context) override;
  std::error_code destroy_id(prov::cm_id* id) noexcept override;
  std::error_code resolve_addr(prov::cm_id* id, const sockaddr* dst, int timeout_ms) override;
  std::error_code resolve_route(prov::cm_id* id, int timeout_ms) override;
  prov::device* id_device(const prov::cm_id* id) const noexcept override;
  result<prov::pd*> alloc_pd(prov::device* dev) override;
  std::error_code dealloc_pd(prov::pd* pd) noexcept override;
  result<prov::comp_channel*> create_comp_channel(prov::device* dev) override;
  std::error_code destroy_comp_channel(prov::comp_channel* channel) noexcept override;
  int comp_channel_fd(const prov::comp_channel* channel) const noexcept override;
  result<prov::cq*> create_cq(prov::device* dev, int cqe, prov::comp_channel* channel) override;
  std::error_code destroy_cq(prov::cq* cq) noexcept override;
  std::error_code req_notify_cq(prov::cq* cq, bool solicited_only) override;
  std::error_code create_qp(prov::cm_id* id, prov::pd* pd, const prov::qp_config& config) override;
  void destroy_qp(prov::cm_id* id) noexcept override;
  std::uint32_t qp_num(const prov::cm_id* id) const noexcept override;

  struct channel;
  struct id;
  struct pd_obj;
  struct comp_obj;
  struct cq_obj;

 private:
  struct timed_event {
    std::chrono::steady_clock::time_point due;
    std::shared_ptr<channel> target;
    prov::cm_event event;
  };

  // Records the call; returns the scripted failure for it, if any.
  std::error_code enter(const char* call);
  void violation(std::string what);
  void schedule(id* target, const std::vector<response>& events);
  void push(const std::shared_ptr<channel>& target, const prov::cm_event& event);
  void timer_loop();

  mutable std::mutex mutex_;
  prov::device* dev_;
  std::vector<std::string> calls_;
  std::size_t taken_ = 0;
  std::vector<std::string> violations_;
  std::map<std::string, int> counts_;
  std::map<std::string, std::map<int, int>> failures_;  // call -> (count at which) -> errno
  std::vector<response> addr_events_;
  std::vector<response> route_events_;
  std::map<channel*, std::shared_ptr<channel>> channels_;
  std::vector<id*> ids_;
  std::set<pd_obj*> pds_;
  std::set<comp_obj*> comps_;
  std::set<cq_obj*> cqs_;
  int channels_created_ = 0;
  std::uint32_t next_qp_num_ = 1;

  std::vector<timed_event> delayed_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread timer_;
};

}  // namespace arpma::test
