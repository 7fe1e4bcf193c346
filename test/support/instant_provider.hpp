// A provider for benchmarks and allocation tests only: connection management is the fake
// provider's (scripted, in memory), and every work request completes into its
// CQ at once, in memory, with the completion channel's eventfd signalled as
// verbs signals an armed CQ. What it costs is a few stores and, for an armed
// CQ, one write(2); what a benchmark on it measures is arpma's own cost.
#pragma once

#include "fake/fake_provider.hpp"
#include "provider/provider.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>

namespace arpma::test {

namespace prov = ::arpma::provider;

class instant_provider final : public prov::provider {
 public:
  instant_provider() = default;
  ~instant_provider() override;

  [[nodiscard]] fake_provider& cm() noexcept { return fake_; }
  /// Write(2)s to completion channels so far (signalled, armed CQs).
  [[nodiscard]] std::uint64_t signals() const noexcept { return signals_; }

  const char* name() const noexcept override { return "instant"; }
  bool owns(const prov::device* dev) const noexcept override { return fake_.owns(dev); }
  result<prov::device*> find_device(const char* addr, bool remote) override {
    return fake_.find_device(addr, remote);
  }
  result<prov::event_channel*> create_event_channel() override {
    return fake_.create_event_channel();
  }
  void destroy_event_channel(prov::event_channel* c) noexcept override {
    fake_.destroy_event_channel(c);
  }
  int event_channel_fd(const prov::event_channel* c) const noexcept override {
    return fake_.event_channel_fd(c);
  }
  std::error_code get_cm_event(prov::event_channel* c, prov::cm_event& out) override {
    return fake_.get_cm_event(c, out);
  }
  result<prov::cm_id*> create_id(prov::event_channel* c, std::uint64_t context) override {
    return fake_.create_id(c, context);
  }
  std::error_code destroy_id(prov::cm_id* id) noexcept override { return fake_.destroy_id(id); }
  std::error_code resolve_addr(prov::cm_id* id, const sockaddr* dst, int ms) override {
    return fake_.resolve_addr(id, dst, ms);
  }
  std::error_code resolve_route(prov::cm_id* id, int ms) override {
    return fake_.resolve_route(id, ms);
  }
  prov::device* id_device(const prov::cm_id* id) const noexcept override {
    return fake_.id_device(id);
  }
  std::error_code connect(prov::cm_id* id, const prov::conn_param& p) override {
    return fake_.connect(id, p);
  }
  std::error_code disconnect(prov::cm_id* id) override { return fake_.disconnect(id); }
  void set_context(prov::cm_id* id, std::uint64_t context) noexcept override {
    fake_.set_context(id, context);
  }
  std::error_code migrate_id(prov::cm_id* id, prov::event_channel* c) override {
    return fake_.migrate_id(id, c);
  }
  result<prov::pd*> alloc_pd(prov::device* dev) override { return fake_.alloc_pd(dev); }
  std::error_code dealloc_pd(prov::pd* pd) noexcept override { return fake_.dealloc_pd(pd); }

  // ---- the instant data path ----
  result<prov::comp_channel*> create_comp_channel(prov::device* dev) override;
  std::error_code destroy_comp_channel(prov::comp_channel* c) noexcept override;
  int comp_channel_fd(const prov::comp_channel* c) const noexcept override;
  result<prov::cq*> create_cq(prov::device* dev, int cqe, prov::comp_channel* c) override;
  std::error_code destroy_cq(prov::cq* cq) noexcept override;
  std::error_code req_notify_cq(prov::cq* cq, bool solicited_only) override;
  std::error_code create_qp(prov::cm_id* id, prov::pd* pd, const prov::qp_config& cfg) override;
  void destroy_qp(prov::cm_id* id) noexcept override;
  std::uint32_t qp_num(const prov::cm_id* id) const noexcept override;
  result<prov::mr*> reg_mr(prov::pd* pd, void* addr, std::size_t length, int access) override;
  std::error_code dereg_mr(prov::mr* mr) noexcept override;
  std::uint32_t mr_lkey(const prov::mr* mr) const noexcept override;
  std::uint32_t mr_rkey(const prov::mr* mr) const noexcept override;
  std::error_code post_send(prov::cm_id* id, const prov::send_wr& wr) override;
  std::error_code post_recv(prov::cm_id* id, const prov::recv_wr& wr) override;
  result<std::size_t> poll_cq(prov::cq* cq, std::span<prov::work_completion> out) override;
  result<prov::cq*> get_cq_event(prov::comp_channel* c) override;
  void ack_cq_events(prov::cq* cq, unsigned count) noexcept override;

 private:
  struct channel_obj;
  struct cq_obj;
  struct qp_obj {
    cq_obj* send = nullptr;
    cq_obj* recv = nullptr;
    std::uint32_t num = 0;
  };
  struct mr_obj {
    std::uint32_t key = 0;
  };
  void complete(cq_obj& cq, const prov::work_completion& wc);

  fake_provider fake_;
  std::unordered_map<const prov::cm_id*, qp_obj> qps_;
  std::uint32_t next_qp_ = 100;
  std::uint32_t next_key_ = 1;
  std::uint64_t signals_ = 0;
};

}  // namespace arpma::test
