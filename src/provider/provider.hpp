// The seam between arpma's core and a transport (rdma-core, the soft provider,
// or the scripted fake used by unit tests). Core sees only these opaque handles
// and never includes <rdma/rdma_cma.h> or <infiniband/verbs.h>.
#pragma once

#include "arpma/result.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <system_error>

struct ibv_context;
struct sockaddr;

namespace arpma::provider {

// Opaque handles; each provider casts its own objects to and from them.
struct event_channel;
struct cm_id;
struct pd;
struct comp_channel;
struct cq;
struct mr;
struct srq;
using device = ::ibv_context;

enum class cm_event_type {
  addr_resolved,
  addr_error,
  route_resolved,
  route_error,
  connect_request,
  connect_response,
  connect_error,
  unreachable,
  rejected,
  established,
  disconnected,
  device_removal,
  addr_change,
  timewait_exit,
  other,
};

[[nodiscard]] const char* to_string(cm_event_type type) noexcept;

/// One rdma_cm event, copied out of the provider and already acknowledged, so
/// no id is ever kept from being migrated or destroyed by a pending event.
struct cm_event {
  cm_event_type type = cm_event_type::other;
  cm_id* id = nullptr;        ///< the id the event is about (new id for connect_request)
  std::uint64_t context = 0;  ///< context of the id (listener's for connect_request)
  int status = 0;             ///< negative errno, or the reject reason
  std::uint8_t private_data_len = 0;
  std::array<std::uint8_t, 255> private_data{};
};

/// Queue pair shape; librpma's fixed values are the defaults.
struct qp_config {
  cq* send_cq = nullptr;
  cq* recv_cq = nullptr;
  std::uint32_t max_send_wr = 10;
  std::uint32_t max_recv_wr = 10;
  std::uint32_t max_sge = 1;
  std::uint32_t max_inline_data = 8;
  srq* shared_rq = nullptr;  ///< receives come from this SRQ instead of the QP's own queue
};

// ---- data path ---------------------------------------------------------------

/// Memory access flags; the values of `ibv_access_flags` (the flush ones as
/// rdma-core 45 defines them), so the verbs provider passes them through.
namespace access {
inline constexpr int local_write = 1;
inline constexpr int remote_write = 1 << 1;
inline constexpr int remote_read = 1 << 2;
inline constexpr int remote_atomic = 1 << 3;
inline constexpr int on_demand = 1 << 6;  ///< an On-Demand Paging registration
inline constexpr int flush_global = 1 << 8;
inline constexpr int flush_persistent = 1 << 9;
}  // namespace access

enum class wr_opcode : std::uint8_t {
  send,
  send_with_imm,
  rdma_write,
  rdma_write_with_imm,
  rdma_read,
  atomic_write,  ///< 8 bytes from `atomic_value` to an 8-byte aligned remote address
  flush,
};

/// What a flush makes durable (IBV_FLUSH_GLOBAL / IBV_FLUSH_PERSISTENT).
/// The flush types of verbs (IBV_FLUSH_GLOBAL, IBV_FLUSH_PERSISTENT) and of
/// the soft wire. The seam's own: arpma::flush_type (librpma's values, with
/// "visibility" for verbs' "global") is above this layer.
enum class flush_type : std::uint8_t { global, persistent };
/// Whether a flush covers its range or the whole remote region.
enum class flush_level : std::uint8_t { range, mr };

/// One scatter/gather element; a zero length needs no valid key.
struct sge {
  std::uint64_t addr = 0;
  std::uint32_t length = 0;
  std::uint32_t lkey = 0;
};

struct send_wr {
  std::uint64_t wr_id = 0;
  wr_opcode opcode = wr_opcode::send;
  bool signaled = true;
  sge local;                       ///< source (send, write), destination (read)
  std::uint64_t remote_addr = 0;   ///< write, read, atomic write, flush
  std::uint32_t rkey = 0;          ///< write, read, atomic write, flush
  std::uint32_t imm = 0;           ///< host order; *_with_imm only
  std::uint64_t flush_length = 0;  ///< flush at level range
  flush_type flush = flush_type::global;
  flush_level level = flush_level::range;
  std::array<std::uint8_t, 8> atomic_value{};
};

struct recv_wr {
  std::uint64_t wr_id = 0;
  sge local;
};

/// `ibv_wc_status`, same values.
enum class wc_status : std::uint8_t {
  success = 0,
  loc_len_err = 1,
  loc_qp_op_err = 2,
  loc_prot_err = 4,
  wr_flush_err = 5,
  bad_resp_err = 7,
  loc_access_err = 8,
  rem_inv_req_err = 9,
  rem_access_err = 10,
  rem_op_err = 11,
  retry_exc_err = 12,
  rnr_retry_exc_err = 13,
  fatal_err = 19,
  general_err = 21,
};

/// `ibv_wc_opcode`, same values (flush as rdma-core 45 defines it).
enum class wc_opcode : std::uint8_t {
  send = 0,
  rdma_write = 1,
  rdma_read = 2,
  flush = 8,
  atomic_write = 9,
  recv = 128,
  recv_rdma_with_imm = 129,
};

/// The fields of `ibv_wc` librpma uses.
struct work_completion {
  std::uint64_t wr_id = 0;
  wc_status status = wc_status::success;
  wc_opcode opcode = wc_opcode::send;
  std::uint32_t byte_len = 0;
  std::uint32_t imm_data = 0;  ///< host order, valid when `with_imm`
  bool with_imm = false;
  std::uint32_t qp_num = 0;
  std::uint32_t vendor_err = 0;
};

/// What a device executes natively. Where a flag is false, post_send of that
/// opcode is EOPNOTSUPP and the caller emulates it (librpma does, with
/// ordinary RDMA writes and reads).
struct device_caps {
  bool native_atomic_write = false;
  bool native_flush = false;
  bool odp = false;  ///< On-Demand Paging for RC reads and writes (librpma's test)
  /// Immediate data on sends and writes: not on iWARP (RDMAP has none; siw
  /// refuses the opcodes with EINVAL).
  bool immediate_data = true;
};

/// The connect/accept parameters librpma sets (src/conn_req.c); the provider
/// copies the private data before the call returns.
struct conn_param {
  const void* private_data = nullptr;
  std::uint8_t private_data_len = 0;
  std::uint8_t responder_resources = 0xff;  // RDMA_MAX_RESP_RES
  std::uint8_t initiator_depth = 0xff;      // RDMA_MAX_INIT_DEPTH
  std::uint8_t flow_control = 1;
  std::uint8_t retry_count = 7;
  std::uint8_t rnr_retry_count = 7;
};

/// Private data limits of rdma_cm over InfiniBand/RoCE (IB CM REQ, REP, REJ);
/// longer private data is EINVAL, as rdma-core reports it.
inline constexpr std::uint8_t max_connect_private_data = 56;
inline constexpr std::uint8_t max_accept_private_data = 196;
inline constexpr std::uint8_t max_reject_private_data = 148;

/// Every call either succeeds or returns the provider's errno as a
/// system-category error_code, with nothing left half-created.
class provider {
 public:
  provider() = default;
  provider(const provider&) = delete;
  provider& operator=(const provider&) = delete;
  virtual ~provider() = default;

  [[nodiscard]] virtual const char* name() const noexcept = 0;
  /// True when `dev` is a device handle this provider handed out.
  [[nodiscard]] virtual bool owns(const device* dev) const noexcept = 0;

  /// The device that owns a local (`remote == false`, bind) or remote
  /// (resolve within 1000 ms) IP address. Blocks, as librpma does.
  virtual result<device*> find_device(const char* addr, bool remote) = 0;

  // Connection manager. Event and completion channel fds start blocking, as
  // rdma-core makes them and as librpma hands them to C programs: a reader
  // that wants them non-blocking sets it itself, through the Asio descriptor
  // it watches them with (one ioctl, which Asio's first wait makes anyway).
  virtual result<event_channel*> create_event_channel() = 0;
  virtual void destroy_event_channel(event_channel* channel) noexcept = 0;
  [[nodiscard]] virtual int event_channel_fd(const event_channel* channel) const noexcept = 0;
  /// Reads and acknowledges one event; EAGAIN when none is pending and the fd
  /// is non-blocking (waits otherwise).
  virtual std::error_code get_cm_event(event_channel* channel, cm_event& out) = 0;
  /// get_cm_event for a caller that knows the fd to be non-blocking (or has
  /// seen it readable): a provider that can tell an empty queue without the
  /// fd's mode answers EAGAIN without asking for it (a drain ends on one).
  virtual std::error_code get_cm_event_nonblocking(event_channel* channel, cm_event& out) {
    return get_cm_event(channel, out);
  }
  virtual result<cm_id*> create_id(event_channel* channel, std::uint64_t context) = 0;
  virtual std::error_code destroy_id(cm_id* id) noexcept = 0;
  virtual std::error_code resolve_addr(cm_id* id, const sockaddr* dst, int timeout_ms) = 0;
  virtual std::error_code resolve_route(cm_id* id, int timeout_ms) = 0;
  /// The device the id is bound to (after address resolution), or nullptr.
  [[nodiscard]] virtual device* id_device(const cm_id* id) const noexcept = 0;

  // Connection lifecycle (rdma_cm semantics; events arrive on the id's
  // channel). The defaults report EOPNOTSUPP for providers without them.
  /// Binds a passive id to a local address (port 0: any free port).
  virtual std::error_code bind_addr(cm_id* id, const sockaddr* addr);
  virtual std::error_code listen(cm_id* id, int backlog);
  /// Port the id is bound to (host order), 0 if none.
  [[nodiscard]] virtual std::uint16_t local_port(const cm_id* id) const noexcept;
  /// Active side: ESTABLISHED, REJECTED or UNREACHABLE follows.
  virtual std::error_code connect(cm_id* id, const conn_param& param);
  /// Passive side, on the id of a CONNECT_REQUEST: ESTABLISHED follows.
  virtual std::error_code accept(cm_id* id, const conn_param& param);
  virtual std::error_code reject(cm_id* id, const void* private_data, std::uint8_t len);
  /// DISCONNECTED follows on both sides (TIMEWAIT_EXIT later).
  virtual std::error_code disconnect(cm_id* id);
  /// Moves `id` and its future events to `channel` (rdma_migrate_id).
  virtual std::error_code migrate_id(cm_id* id, event_channel* channel);
  /// Sets the context events of `id` carry; a CONNECT_REQUEST's new id starts
  /// with its listener's, as in rdma_cm.
  virtual void set_context(cm_id* id, std::uint64_t context) noexcept;

  // Verbs.
  virtual result<pd*> alloc_pd(device* dev) = 0;
  virtual std::error_code dealloc_pd(pd* pd) noexcept = 0;
  virtual result<comp_channel*> create_comp_channel(device* dev) = 0;
  virtual std::error_code destroy_comp_channel(comp_channel* channel) noexcept = 0;
  [[nodiscard]] virtual int comp_channel_fd(const comp_channel* channel) const noexcept = 0;
  virtual result<cq*> create_cq(device* dev, int cqe, comp_channel* channel) = 0;
  virtual std::error_code destroy_cq(cq* cq) noexcept = 0;
  virtual std::error_code req_notify_cq(cq* cq, bool solicited_only) = 0;
  /// Creates the RC queue pair of `id` (rdma_create_qp_ex semantics).
  virtual std::error_code create_qp(cm_id* id, pd* pd, const qp_config& config) = 0;
  virtual void destroy_qp(cm_id* id) noexcept = 0;
  [[nodiscard]] virtual std::uint32_t qp_num(const cm_id* id) const noexcept = 0;

  // Data path (ibv_* semantics). The defaults report EOPNOTSUPP.
  [[nodiscard]] virtual device_caps caps(const device* dev) const noexcept;
  /// Registers [addr, addr + length) with `access` flags (see `access`).
  virtual result<mr*> reg_mr(pd* pd, void* addr, std::size_t length, int access);
  virtual std::error_code dereg_mr(mr* mr) noexcept;
  [[nodiscard]] virtual std::uint32_t mr_lkey(const mr* mr) const noexcept;
  [[nodiscard]] virtual std::uint32_t mr_rkey(const mr* mr) const noexcept;
  /// ibv_advise_mr on [offset, offset + length) of `mr` (the caller checked
  /// the range): `advice` and `flags` are ibv's values. EOPNOTSUPP where the
  /// device has no On-Demand Paging.
  virtual std::error_code advise_mr(mr* mr, std::size_t offset, std::uint32_t length, int advice,
                                    std::uint32_t flags);
  /// Posts on the QP of `id`; ENOMEM when its send queue is full.
  virtual std::error_code post_send(cm_id* id, const send_wr& wr);
  /// ENOMEM when the receive queue is full; EINVAL when the QP uses an SRQ.
  virtual std::error_code post_recv(cm_id* id, const recv_wr& wr);
  /// Moves up to out.size() completions into `out`; returns how many.
  virtual result<std::size_t> poll_cq(cq* cq, std::span<work_completion> out);
  /// The CQ whose notification fired; EAGAIN when none and the fd is
  /// non-blocking (waits otherwise). Acknowledge it with ack_cq_events.
  virtual result<cq*> get_cq_event(comp_channel* channel);
  virtual void ack_cq_events(cq* cq, unsigned count) noexcept;
  virtual result<srq*> create_srq(pd* pd, std::uint32_t max_wr, std::uint32_t max_sge);
  virtual std::error_code destroy_srq(srq* srq) noexcept;
  virtual std::error_code post_srq_recv(srq* srq, const recv_wr& wr);
};

/// The provider chosen by ARPMA_PROVIDER (verbs | soft | auto; default auto).
[[nodiscard]] provider& default_provider();

/// The provider that handed out `dev`, or nullptr when none did.
[[nodiscard]] provider* provider_of(const device* dev) noexcept;

/// Test seam: while alive, `p` is the default provider and is asked first
/// about device ownership. Not thread-safe; install before any other call.
class scoped_override {
 public:
  explicit scoped_override(provider& p) noexcept;
  scoped_override(const scoped_override&) = delete;
  scoped_override& operator=(const scoped_override&) = delete;
  ~scoped_override();

 private:
  provider* previous_;
};

}  // namespace arpma::provider
