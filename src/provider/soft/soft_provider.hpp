// The soft provider: RDMA semantics without RDMA hardware, for any Linux
// machine. It covers the device, the connection manager (address and route
// resolution, and the connection lifecycle over TCP: bind, listen, connect,
// accept, reject, disconnect, migration) and the verbs objects a connection
// request is made of (PD, completion channels, CQs, RC QPs), and the data path
// (MRs, SRQs, send/recv, write, read, atomic write, flush, completions;
// soft_datapath.hpp). docs/soft-provider.md describes the threads, the rules
// and the wire protocol.
#pragma once

#include "provider/provider.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

namespace arpma::provider {

// Handle parameters are named `h`: the definitions give the downcast object
// (soft_id, soft_pd, ...) the natural name.
class soft_provider : public provider {  // not final: tests override single calls
 public:
  soft_provider();
  /// Stops and joins the progress thread, if one was started. Every id must
  /// have been destroyed before.
  ~soft_provider() override;
  soft_provider(const soft_provider&) = delete;
  soft_provider& operator=(const soft_provider&) = delete;
  soft_provider(soft_provider&&) = delete;
  soft_provider& operator=(soft_provider&&) = delete;

  [[nodiscard]] const char* name() const noexcept override { return "soft"; }
  bool owns(const device* dev) const noexcept override;
  result<device*> find_device(const char* addr, bool remote) override;

  result<event_channel*> create_event_channel() override;
  void destroy_event_channel(event_channel* channel) noexcept override;
  int event_channel_fd(const event_channel* channel) const noexcept override;
  std::error_code get_cm_event(event_channel* channel, cm_event& out) override;
  std::error_code get_cm_event_nonblocking(event_channel* channel, cm_event& out) override;
  result<cm_id*> create_id(event_channel* channel, std::uint64_t context) override;
  std::error_code destroy_id(cm_id* h) noexcept override;
  std::error_code resolve_addr(cm_id* h, const sockaddr* dst, int timeout_ms) override;
  std::error_code resolve_route(cm_id* h, int timeout_ms) override;
  device* id_device(const cm_id* h) const noexcept override;

  std::error_code bind_addr(cm_id* h, const sockaddr* addr) override;
  std::error_code listen(cm_id* h, int backlog) override;
  std::uint16_t local_port(const cm_id* h) const noexcept override;
  std::error_code connect(cm_id* h, const conn_param& param) override;
  std::error_code accept(cm_id* h, const conn_param& param) override;
  std::error_code reject(cm_id* h, const void* private_data, std::uint8_t len) override;
  std::error_code disconnect(cm_id* h) override;
  std::error_code migrate_id(cm_id* h, event_channel* channel) override;
  void set_context(cm_id* h, std::uint64_t context) noexcept override;

  result<pd*> alloc_pd(device* dev) override;
  std::error_code dealloc_pd(pd* h) noexcept override;
  result<comp_channel*> create_comp_channel(device* dev) override;
  std::error_code destroy_comp_channel(comp_channel* h) noexcept override;
  int comp_channel_fd(const comp_channel* h) const noexcept override;
  result<cq*> create_cq(device* dev, int cqe, comp_channel* channel) override;
  std::error_code destroy_cq(cq* h) noexcept override;
  std::error_code req_notify_cq(cq* h, bool solicited_only) override;
  std::error_code create_qp(cm_id* h, pd* p, const qp_config& config) override;
  void destroy_qp(cm_id* h) noexcept override;
  std::uint32_t qp_num(const cm_id* h) const noexcept override;

  device_caps caps(const device* dev) const noexcept override;
  result<mr*> reg_mr(pd* p, void* addr, std::size_t length, int access) override;
  std::error_code dereg_mr(mr* h) noexcept override;
  std::error_code advise_mr(mr* h, std::size_t offset, std::uint32_t length, int advice,
                            std::uint32_t flags) override;
  std::uint32_t mr_lkey(const mr* h) const noexcept override;
  std::uint32_t mr_rkey(const mr* h) const noexcept override;
  std::error_code post_send(cm_id* h, const send_wr& wr) override;
  std::error_code post_recv(cm_id* h, const recv_wr& wr) override;
  result<std::size_t> poll_cq(cq* h, std::span<work_completion> out) override;
  result<cq*> get_cq_event(comp_channel* h) override;
  void ack_cq_events(cq* h, unsigned count) noexcept override;
  result<srq*> create_srq(pd* p, std::uint32_t max_wr, std::uint32_t max_sge) override;
  std::error_code destroy_srq(srq* h) noexcept override;
  std::error_code post_srq_recv(srq* h, const recv_wr& wr) override;

  /// How long a SEND (or WRITE_WITH_IMM) that finds no posted receive waits
  /// for one before the sender gets RNR_RETRY_EXC_ERR (verbs with rnr_retry
  /// 7 waits forever). Applies to ids created afterwards.
  void set_rnr_timeout(std::chrono::milliseconds timeout) noexcept { rnr_timeout_ = timeout; }
  static constexpr std::chrono::milliseconds default_rnr_timeout{10000};

  /// What a peer can make this provider wait for or hold (docs/soft-provider.md,
  /// "Bounds"). Applies to ids created afterwards.
  struct limits {
    /// The handshake: the REQ after the TCP accept; the RTU after accept
    /// (then UNREACHABLE).
    std::chrono::milliseconds handshake{10000};
    /// One frame, from its first byte to its last.
    std::chrono::milliseconds frame{10000};
    /// TCP connections of one listener that have not sent their REQ yet;
    /// more are closed at once.
    std::size_t half_open_per_listener = 1024;
    /// Requests held behind RNR waits on all links of this provider, counted
    /// with their bookkeeping; past it, a link that holds more stops reading.
    std::size_t held_bytes_total = std::size_t{256} << 20;
    /// READ responses queued on all links of this provider and not yet
    /// written to their sockets; a READ that arrives past it is refused
    /// (REM_INV_REQ_ERR, the link closes), as one past the responder resources.
    std::size_t queued_read_bytes_total = std::size_t{256} << 20;
    /// How long a poll of a CQ keeps the links of its QPs for the polling
    /// thread (the progress thread leaves their sockets alone meanwhile): a
    /// poller that stops without arming the CQ delays its peer's requests by
    /// this much at most. Arming the CQ ends it at once.
    std::chrono::microseconds poll_lease{1000};
    /// The longest an acknowledgement waits for a frame to carry it (an
    /// answer to the message it acknowledges, a batch) when the application
    /// neither answers nor polls the CQ again; the peer's send completes
    /// that much later at most.
    std::chrono::microseconds ack_delay{1000};
    /// How long the progress thread keeps polling its sockets after its last
    /// piece of work before it sleeps: a stream's next frames then find it
    /// awake (no wake-up per batch), at the cost of up to this much CPU after
    /// each burst. 0: it sleeps at once.
    std::chrono::microseconds progress_spin{50};
  };
  void set_limits(const limits& l) noexcept;
  [[nodiscard]] limits current_limits() const noexcept {
    const std::lock_guard lock(engine_mutex_);
    return limits_;
  }

  /// What every id of this provider adds to (for limits, tests and diagnostics).
  struct totals {
    /// Bytes held behind RNR waits on every link (limits::held_bytes_total).
    std::atomic<std::size_t> held_bytes{0};
    /// READ response bytes queued, not yet written (limits::queued_read_bytes_total),
    /// and the most there have been at once.
    std::atomic<std::size_t> queued_read_bytes{0};
    std::atomic<std::size_t> queued_read_peak{0};
    /// Ids alive: created and not yet freed (destroy_id, then the progress
    /// thread's last handler of the id). A leak check's count.
    std::atomic<std::size_t> live_ids{0};
    /// Links that failed (EOF, reset, a write error, a frame refused, a deadline).
    std::atomic<std::size_t> link_failures{0};
    /// Times the progress thread left a link to a polling application thread.
    std::atomic<std::size_t> parks{0};
    /// Requests that waited in a link's cork to go out with the next ones.
    std::atomic<std::size_t> batched{0};
    /// Reads of a link's socket by the progress thread that found nothing.
    std::atomic<std::size_t> empty_progress_reads{0};
    /// Times a completion channel's reader, woken by a link's socket, read it
    /// itself (no hop through the progress thread).
    std::atomic<std::size_t> channel_reads{0};
    /// Times the progress thread, placing a payload whose rest had not come
    /// yet, asked the socket again instead of going back to its reactor.
    std::atomic<std::size_t> payload_waits{0};
  };
  [[nodiscard]] std::size_t held_bytes() const noexcept { return totals_.held_bytes.load(); }
  [[nodiscard]] std::size_t queued_read_bytes() const noexcept {
    return totals_.queued_read_bytes.load();
  }
  [[nodiscard]] std::size_t queued_read_bytes_peak() const noexcept {
    return totals_.queued_read_peak.load();
  }
  [[nodiscard]] std::size_t live_ids() const noexcept { return totals_.live_ids.load(); }
  [[nodiscard]] std::size_t link_failures() const noexcept { return totals_.link_failures.load(); }
  [[nodiscard]] std::size_t parks() const noexcept { return totals_.parks.load(); }
  [[nodiscard]] std::size_t batched() const noexcept { return totals_.batched.load(); }
  [[nodiscard]] std::size_t empty_progress_reads() const noexcept {
    return totals_.empty_progress_reads.load();
  }
  [[nodiscard]] std::size_t channel_reads() const noexcept { return totals_.channel_reads.load(); }
  [[nodiscard]] std::size_t payload_waits() const noexcept { return totals_.payload_waits.load(); }

 private:
  struct device_storage;
  class engine;
  /// The progress thread, started on first need (bind or connect).
  engine& progress();

  std::unique_ptr<device_storage> device_;
  /// Before engine_, whose handlers may hold ids (that count in it) until it is gone.
  totals totals_;
  std::atomic<std::uint32_t> next_qp_num_;
  mutable std::mutex engine_mutex_;
  std::unique_ptr<engine> engine_;
  std::chrono::milliseconds rnr_timeout_ = default_rnr_timeout;
  limits limits_;
};

}  // namespace arpma::provider
