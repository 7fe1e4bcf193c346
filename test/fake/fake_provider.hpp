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
#include <optional>
#include <set>
#include <span>
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
    std::vector<std::uint8_t> private_data{};  ///< carried by the event (ESTABLISHED, ...)
  };

  fake_provider();
  ~fake_provider() override;

  // ---- scripting -----------------------------------------------------------
  /// The `nth` call (1-based, counted from now) to `call` fails with `err`.
  void fail(const std::string& call, int err, int nth = 1);
  /// The `nth` call (1-based, counted from now) to resolve_addr or
  /// resolve_route takes `duration` longer, after its events are scheduled:
  /// the calling thread is away while they arrive (a descheduled thread).
  void stall(const std::string& call, std::chrono::milliseconds duration, int nth = 1);
  /// Events each resolve_addr / resolve_route call produces (default: the
  /// matching *_RESOLVED at once). An empty list: the call produces nothing.
  void on_resolve_addr(std::vector<response> events);
  void on_resolve_route(std::vector<response> events);
  /// Queues an event for `id` now, as the provider would.
  void deliver(prov::cm_id* id, prov::cm_event_type type, int status = 0);
  /// Queues a scripted event (private data, delay) for `id`.
  void deliver(prov::cm_id* id, const response& event);

  // Lifecycle. Events each connect / accept / disconnect call produces on the
  // calling id (defaults: ESTABLISHED, ESTABLISHED, DISCONNECTED at once; an
  // empty list: nothing). reject, bind_addr, listen and migrate_id produce none.
  void on_connect(std::vector<response> events);
  void on_accept(std::vector<response> events);
  void on_disconnect(std::vector<response> events);
  /// A client's CONNECT_REQUEST arrives at listening `listener`: a new id is
  /// born on the listener's channel with the listener's context (read when the
  /// event is read, as rdma-core does) and the event, carrying
  /// `private_data`, is queued there (after `delay`). Returns the new id.
  /// Destroying the listener before the event is read destroys the new id too,
  /// as the kernel does. Not a provider call: not in the call log.
  prov::cm_id* incoming(prov::cm_id* listener, std::vector<std::uint8_t> private_data = {},
                        std::chrono::milliseconds delay = {});
  /// What caps() reports for the device (default: nothing native, no ODP).
  void set_caps(const prov::device_caps& caps);
  /// Contexts are read when the event is read (rdma-core; default) or, with
  /// `false`, stamped when it is queued (as a provider copying them early would).
  void context_at_read(bool at_read);

  // ---- data path (fake_datapath.cpp) ----------------------------------------
  // post_send / post_recv only record the work request (no memory is touched);
  // its completion exists once the test releases it, in any order, with any
  // status. A released completion goes to the QP's send or receive CQ; an
  // armed CQ then fires once on its completion channel (its eventfd becomes
  // readable) and stays unarmed until req_notify_cq, as rdma-core's do.
  /// A work request posted and not yet released.
  struct posted_wr {
    bool receive = false;
    prov::send_wr send;  ///< when !receive
    prov::recv_wr recv;  ///< when receive
    [[nodiscard]] std::uint64_t wr_id() const noexcept { return receive ? recv.wr_id : send.wr_id; }
  };
  /// What `id` has posted and the test has not released, oldest first.
  [[nodiscard]] std::vector<posted_wr> outstanding(const prov::cm_id* id) const;
  /// Releases the outstanding work request `wr_id` of `id` with `status`
  /// (byte_len: the request's length, or `byte_len` when given). An
  /// unsignaled send that succeeds releases no completion, as on hardware.
  /// false when `id` has no such request.
  bool complete(prov::cm_id* id, std::uint64_t wr_id,
                prov::wc_status status = prov::wc_status::success,
                std::optional<std::uint32_t> byte_len = std::nullopt);
  /// A message from the peer, as its SEND (WITH IMMEDIATE when `imm` is
  /// given) would arrive: it takes the oldest receive `id` has posted, its
  /// payload is copied into that receive's buffer and its completion is
  /// released; a payload larger than the buffer fails the receive with
  /// LOC_LEN_ERR and copies nothing, as a device does. false when `id` has no
  /// receive posted.
  bool receive(prov::cm_id* id, std::span<const std::uint8_t> payload,
               std::optional<std::uint32_t> imm = std::nullopt);
  /// The bytes a posted send carries (its local buffer, as it is now).
  [[nodiscard]] static std::vector<std::uint8_t> payload(const posted_wr& wr);
  /// Releases every outstanding request of `id` with WR_FLUSH_ERR, oldest
  /// first (a QP gone to the error state); how many.
  std::size_t flush(prov::cm_id* id);
  /// Completions released on `cq` and not yet polled.
  [[nodiscard]] std::size_t unpolled(const prov::cq* cq) const;

  // ---- inspection ----------------------------------------------------------
  /// Every call made, in order ("create_cq", "destroy_id", ...).
  [[nodiscard]] std::vector<std::string> calls() const;
  /// Calls made since the last call to this function.
  [[nodiscard]] std::vector<std::string> take_calls();
  /// Objects created and not yet destroyed (channels, ids, PDs, CQs, QPs, SRQs).
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
  /// What one connect / accept / reject call was given.
  struct sent {
    std::string call;  ///< "connect", "accept" or "reject"
    prov::cm_id* id = nullptr;
    std::vector<std::uint8_t> private_data;
    prov::conn_param param;  ///< private_data pointer cleared
  };
  /// Every successful connect / accept / reject, in order.
  [[nodiscard]] std::vector<sent> sent_data() const;
  /// The channel `id` is on now (nullptr if the id is unknown).
  [[nodiscard]] prov::event_channel* channel_of(const prov::cm_id* id) const;
  /// The context `id` has now.
  [[nodiscard]] std::uint64_t context_of(const prov::cm_id* id) const;
  /// The access flags of every reg_mr call, in order (failed ones included).
  [[nodiscard]] std::vector<int> reg_accesses() const;
  /// What one advise_mr call was given.
  struct advice_call {
    std::size_t offset = 0;
    std::uint32_t length = 0;
    int advice = 0;
    std::uint32_t flags = 0;
  };
  [[nodiscard]] std::vector<advice_call> advice_calls() const;
  /// Events queued (not delayed) on `channel`.
  [[nodiscard]] std::size_t queued(const prov::event_channel* channel) const;

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
  std::error_code bind_addr(prov::cm_id* id, const sockaddr* addr) override;
  std::error_code listen(prov::cm_id* id, int backlog) override;
  std::uint16_t local_port(const prov::cm_id* id) const noexcept override;
  std::error_code connect(prov::cm_id* id, const prov::conn_param& param) override;
  std::error_code accept(prov::cm_id* id, const prov::conn_param& param) override;
  std::error_code reject(prov::cm_id* id, const void* private_data, std::uint8_t len) override;
  std::error_code disconnect(prov::cm_id* id) override;
  std::error_code migrate_id(prov::cm_id* id, prov::event_channel* channel) override;
  void set_context(prov::cm_id* id, std::uint64_t context) noexcept override;
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
  // MRs: registered (counted as live objects) and deregistered; advise_mr
  // records its arguments and reports the scripted failure.
  prov::device_caps caps(const prov::device* dev) const noexcept override;
  result<prov::mr*> reg_mr(prov::pd* pd, void* addr, std::size_t length, int access) override;
  std::error_code dereg_mr(prov::mr* mr) noexcept override;
  std::error_code advise_mr(prov::mr* mr, std::size_t offset, std::uint32_t length, int advice,
                            std::uint32_t flags) override;
  std::error_code post_send(prov::cm_id* id, const prov::send_wr& wr) override;
  std::error_code post_recv(prov::cm_id* id, const prov::recv_wr& wr) override;
  result<std::size_t> poll_cq(prov::cq* cq, std::span<prov::work_completion> out) override;
  result<prov::cq*> get_cq_event(prov::comp_channel* channel) override;
  void ack_cq_events(prov::cq* cq, unsigned count) noexcept override;
  // SRQs: created, destroyed (EBUSY while a QP uses one) and counted; posting
  // records the call and reports the scripted failure, nothing more.
  result<prov::srq*> create_srq(prov::pd* pd, std::uint32_t max_wr, std::uint32_t max_sge) override;
  std::error_code destroy_srq(prov::srq* srq) noexcept override;
  std::error_code post_srq_recv(prov::srq* srq, const prov::recv_wr& wr) override;

  struct channel;
  struct id;
  struct pd_obj;
  struct comp_obj;
  struct cq_obj;
  struct srq_obj;
  struct mr_obj;

 private:
  struct timed_event {
    std::chrono::steady_clock::time_point due;
    std::shared_ptr<channel> target;
    prov::cm_event event;
  };

  // Records the call; returns the scripted failure for it, if any.
  std::error_code enter(const char* call);
  /// Sleeps for what stall() scripted for this call of `call`, if anything.
  void linger(const char* call);
  /// What fail() or stall() scripted for the `count`th call to `call`, taken
  /// out of `script` (called with the mutex held).
  template <class T>
  static std::optional<T> take_scripted(std::map<std::string, std::map<int, T>>& script,
                                        const std::string& call, int count) {
    auto it = script.find(call);
    if (it == script.end()) return std::nullopt;
    auto hit = it->second.find(count);
    if (hit == it->second.end()) return std::nullopt;
    T value = hit->second;
    it->second.erase(hit);
    return value;
  }
  void violation(std::string what);
  void schedule(id* target, const std::vector<response>& events);
  // Called with the mutex held: drops what is queued or delayed for `target`
  // (and, for a listener, the requests it has not handed out yet).
  void forget_events(id* target);
  void record_sent(const char* call, prov::cm_id* h, const void* data, std::uint8_t len,
                   const prov::conn_param& param);
  [[nodiscard]] bool alive(const id* i) const;
  void push(const std::shared_ptr<channel>& target, const prov::cm_event& event);
  // With the mutex held: `wc` to `cq`, firing its channel if armed.
  void release_locked(cq_obj* cq, const prov::work_completion& wc);
  void timer_loop();

  mutable std::mutex mutex_;
  prov::device* dev_;
  std::vector<std::string> calls_;
  std::size_t taken_ = 0;
  std::vector<std::string> violations_;
  std::map<std::string, int> counts_;
  std::map<std::string, std::map<int, std::chrono::milliseconds>> stalls_;
  std::map<std::string, std::map<int, int>> failures_;  // call -> (count at which) -> errno
  std::vector<response> addr_events_;
  std::vector<response> route_events_;
  std::vector<response> connect_events_;
  std::vector<response> accept_events_;
  std::vector<response> disconnect_events_;
  std::vector<sent> sent_;
  bool context_at_read_ = true;
  std::uint16_t next_port_ = 20000;
  std::map<channel*, std::shared_ptr<channel>> channels_;
  std::vector<id*> ids_;
  std::set<pd_obj*> pds_;
  std::set<comp_obj*> comps_;
  std::set<cq_obj*> cqs_;
  std::set<srq_obj*> srqs_;
  std::set<mr_obj*> mrs_;
  prov::device_caps caps_;
  std::vector<int> reg_accesses_;
  std::vector<advice_call> advice_calls_;
  int channels_created_ = 0;
  std::uint32_t next_qp_num_ = 1;

  std::vector<timed_event> delayed_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread timer_;
};

}  // namespace arpma::test
