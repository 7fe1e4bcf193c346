// The soft provider: RDMA semantics without RDMA hardware, for any Linux
// machine. This stage covers the device, the connection manager's address and
// route resolution, and the verbs objects a connection request is made of
// (PD, completion channels, CQs, RC QPs); connections over TCP come next.
#pragma once

#include "provider/provider.hpp"

#include <atomic>
#include <memory>

namespace arpma::provider {

class soft_provider final : public provider {
 public:
  soft_provider();
  ~soft_provider() override;

  const char* name() const noexcept override { return "soft"; }
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

 private:
  struct device_storage;
  std::unique_ptr<device_storage> device_;
  std::atomic<std::uint32_t> next_qp_num_;
};

}  // namespace arpma::provider
