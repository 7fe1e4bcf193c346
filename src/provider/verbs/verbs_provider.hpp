// The rdma-core provider: librdmacm + libibverbs, for real NICs, Soft-RoCE
// and Soft-iWARP. The only place besides the C header that sees rdma-core types.
#pragma once

#include "provider/provider.hpp"

#include <map>
#include <mutex>

namespace arpma::provider {

class verbs_provider final : public provider {
 public:
  [[nodiscard]] const char* name() const noexcept override { return "verbs"; }
  /// The RNR NAK timer an established RC QP answers with (IB encoding: 0.64 ms), where rdma_cm
  /// leaves 0 (655.36 ms).
  static constexpr std::uint8_t min_rnr_timer = 12;
  /// Only the contexts librdmacm opened (its device list): any other pointer,
  /// zeroed or garbage, would be dereferenced by ibv_alloc_pd.
  bool owns(const device* dev) const noexcept override;
  result<device*> find_device(const char* addr, bool remote) override;

  result<event_channel*> create_event_channel() override;
  void destroy_event_channel(event_channel* channel) noexcept override;
  int event_channel_fd(const event_channel* channel) const noexcept override;
  std::error_code get_cm_event(event_channel* channel, cm_event& out) override;
  result<cm_id*> create_id(event_channel* channel, std::uint64_t context) override;
  std::error_code destroy_id(cm_id* id) noexcept override;
  std::error_code resolve_addr(cm_id* id, const sockaddr* dst, int timeout_ms) override;
  std::error_code resolve_route(cm_id* id, int timeout_ms) override;
  device* id_device(const cm_id* id) const noexcept override;
  std::error_code bind_addr(cm_id* id, const sockaddr* addr) override;
  std::error_code listen(cm_id* id, int backlog) override;
  std::uint16_t local_port(const cm_id* id) const noexcept override;
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
  int comp_channel_fd(const comp_channel* channel) const noexcept override;
  result<cq*> create_cq(device* dev, int cqe, comp_channel* channel) override;
  std::error_code destroy_cq(cq* cq) noexcept override;
  std::error_code req_notify_cq(cq* cq, bool solicited_only) override;
  std::error_code create_qp(cm_id* id, pd* pd, const qp_config& config) override;
  void destroy_qp(cm_id* id) noexcept override;
  std::uint32_t qp_num(const cm_id* id) const noexcept override;

  device_caps caps(const device* dev) const noexcept override;
  result<mr*> reg_mr(pd* pd, void* addr, std::size_t length, int access) override;
  std::error_code dereg_mr(mr* mr) noexcept override;
  std::error_code advise_mr(mr* mr, std::size_t offset, std::uint32_t length, int advice,
                            std::uint32_t flags) override;
  std::uint32_t mr_lkey(const mr* mr) const noexcept override;
  std::uint32_t mr_rkey(const mr* mr) const noexcept override;
  std::error_code post_send(cm_id* id, const send_wr& wr) override;
  std::error_code post_recv(cm_id* id, const recv_wr& wr) override;
  result<std::size_t> poll_cq(cq* cq, std::span<work_completion> out) override;
  result<cq*> get_cq_event(comp_channel* channel) override;
  void ack_cq_events(cq* cq, unsigned count) noexcept override;
  result<srq*> create_srq(pd* pd, std::uint32_t max_wr, std::uint32_t max_sge) override;
  std::error_code destroy_srq(srq* srq) noexcept override;
  std::error_code post_srq_recv(srq* srq, const recv_wr& wr) override;

 private:
  /// Device capabilities, queried once per device (post_send consults them).
  mutable std::mutex caps_mutex_;
  mutable std::map<const device*, device_caps> caps_;
};

}  // namespace arpma::provider
