// A provider that fails calls of the one it wraps at the fault points of support/fault.hpp
// (ARPMA_FAULT_INJECTION builds only; registry.cpp wraps soft and verbs in one while the
// fault environment is set). What each call fails with is in docs/reliability.md.
#pragma once

#ifdef ARPMA_FAULT_INJECTION

#include "provider/provider.hpp"

namespace arpma::provider {

class fault_provider final : public provider {
 public:
  explicit fault_provider(provider& inner) noexcept : inner_(inner) {}

  [[nodiscard]] provider& inner() const noexcept { return inner_; }

  [[nodiscard]] const char* name() const noexcept override { return inner_.name(); }
  [[nodiscard]] bool owns(const device* dev) const noexcept override { return inner_.owns(dev); }
  result<device*> find_device(const char* addr, bool remote) override;

  result<event_channel*> create_event_channel() override;
  void destroy_event_channel(event_channel* channel) noexcept override;
  [[nodiscard]] int event_channel_fd(const event_channel* channel) const noexcept override;
  std::error_code get_cm_event(event_channel* channel, cm_event& out) override;
  std::error_code get_cm_event_nonblocking(event_channel* channel, cm_event& out) override;
  result<cm_id*> create_id(event_channel* channel, std::uint64_t context) override;
  std::error_code destroy_id(cm_id* id) noexcept override;
  std::error_code resolve_addr(cm_id* id, const sockaddr* dst, int timeout_ms) override;
  std::error_code resolve_route(cm_id* id, int timeout_ms) override;
  [[nodiscard]] device* id_device(const cm_id* id) const noexcept override;

  std::error_code bind_addr(cm_id* id, const sockaddr* addr) override;
  std::error_code listen(cm_id* id, int backlog) override;
  [[nodiscard]] std::uint16_t local_port(const cm_id* id) const noexcept override;
  std::error_code connect(cm_id* id, const conn_param& param) override;
  std::error_code accept(cm_id* id, const conn_param& param) override;
  std::error_code reject(cm_id* id, const void* private_data, std::uint8_t len) override;
  std::error_code disconnect(cm_id* id) override;
  std::error_code migrate_id(cm_id* id, event_channel* channel) override;
  void set_context(cm_id* id, std::uint64_t context) noexcept override;

  result<pd*> alloc_pd(device* dev) override;
  std::error_code dealloc_pd(pd* pd) noexcept override;
  result<comp_channel*> create_comp_channel(device* dev) override;
  std::error_code destroy_comp_channel(comp_channel* channel) noexcept override;
  [[nodiscard]] int comp_channel_fd(const comp_channel* channel) const noexcept override;
  result<cq*> create_cq(device* dev, int cqe, comp_channel* channel) override;
  std::error_code destroy_cq(cq* cq) noexcept override;
  std::error_code req_notify_cq(cq* cq, bool solicited_only) override;
  std::error_code create_qp(cm_id* id, pd* pd, const qp_config& config) override;
  void destroy_qp(cm_id* id) noexcept override;
  [[nodiscard]] std::uint32_t qp_num(const cm_id* id) const noexcept override;

  [[nodiscard]] device_caps caps(const device* dev) const noexcept override;
  result<mr*> reg_mr(pd* pd, void* addr, std::size_t length, int access) override;
  std::error_code dereg_mr(mr* mr) noexcept override;
  std::error_code advise_mr(mr* mr, std::size_t offset, std::uint32_t length, int advice,
                            std::uint32_t flags) override;
  [[nodiscard]] std::uint32_t mr_lkey(const mr* mr) const noexcept override;
  [[nodiscard]] std::uint32_t mr_rkey(const mr* mr) const noexcept override;
  std::error_code post_send(cm_id* id, const send_wr& wr) override;
  std::error_code post_recv(cm_id* id, const recv_wr& wr) override;
  result<std::size_t> poll_cq(cq* cq, std::span<work_completion> out) override;
  result<cq*> get_cq_event(comp_channel* channel) override;
  void ack_cq_events(cq* cq, unsigned count) noexcept override;
  result<srq*> create_srq(pd* pd, std::uint32_t max_wr, std::uint32_t max_sge) override;
  std::error_code destroy_srq(srq* srq) noexcept override;
  std::error_code post_srq_recv(srq* srq, const recv_wr& wr) override;

 private:
  provider& inner_;
};

}  // namespace arpma::provider

#endif
