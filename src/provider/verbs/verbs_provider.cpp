#include "provider/verbs/verbs_provider.hpp"

#include "support/log.hpp"

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace arpma::provider {
namespace {

// rdma-core reports failures through errno; some paths leave it 0.
std::error_code last_error() noexcept { return {errno != 0 ? errno : EIO, std::system_category()}; }

std::error_code from_status(int rc) noexcept {
  if (rc == 0) return {};
  return {rc > 0 ? rc : (rc < 0 ? -rc : EIO), std::system_category()};
}

auto* native(event_channel* c) noexcept { return reinterpret_cast<rdma_event_channel*>(c); }
auto* native(const event_channel* c) noexcept {
  return reinterpret_cast<const rdma_event_channel*>(c);
}
auto* native(cm_id* id) noexcept { return reinterpret_cast<rdma_cm_id*>(id); }
auto* native(const cm_id* id) noexcept { return reinterpret_cast<const rdma_cm_id*>(id); }
auto* native(pd* p) noexcept { return reinterpret_cast<ibv_pd*>(p); }
auto* native(comp_channel* c) noexcept { return reinterpret_cast<ibv_comp_channel*>(c); }
auto* native(const comp_channel* c) noexcept {
  return reinterpret_cast<const ibv_comp_channel*>(c);
}
auto* native(cq* c) noexcept { return reinterpret_cast<ibv_cq*>(c); }
auto* native(mr* m) noexcept { return reinterpret_cast<ibv_mr*>(m); }
auto* native(const mr* m) noexcept { return reinterpret_cast<const ibv_mr*>(m); }
auto* native(srq* s) noexcept { return reinterpret_cast<ibv_srq*>(s); }

// Marks a QP whose RNR wait is short already, in its user context (ibv_qp::qp_context, which
// nothing else here sets or reads): the passive side shortens it in accept(), and its
// ESTABLISHED then costs no second ibv_modify_qp (one ioctl of a connection's ~27).
constexpr char rnr_wait_short = 0;

// rdma_cm takes a QP to RTR with min_rnr_timer 0, which IB encodes as 655.36 ms: a SEND that
// finds no receive posted stalls its sender that long before each retry. Once the QP is ready
// to send (RTS), the wait is made 0.64 ms (12), the value perftest and most verbs programs
// set; once per QP. iWARP has no RNR, and no call is made; for a QP not yet in RTS the modify
// fails and is ignored.
void shorten_rnr_wait(rdma_cm_id* id) noexcept {
  if (id == nullptr || id->qp == nullptr) return;
  ibv_qp* qp = id->qp;
  if (qp->qp_context == &rnr_wait_short) return;
  if (qp->context->device->transport_type == IBV_TRANSPORT_IWARP) return;
  ibv_qp_attr attr{};
  attr.min_rnr_timer = verbs_provider::min_rnr_timer;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): a tag, never written through
  if (ibv_modify_qp(qp, &attr, IBV_QP_MIN_RNR_TIMER) == 0)
    qp->qp_context = const_cast<char*>(&rnr_wait_short);
}

// The seam's values are rdma-core's; these keep the casts honest.
static_assert(access::local_write == IBV_ACCESS_LOCAL_WRITE);
static_assert(access::remote_write == IBV_ACCESS_REMOTE_WRITE);
static_assert(access::remote_read == IBV_ACCESS_REMOTE_READ);
static_assert(access::remote_atomic == IBV_ACCESS_REMOTE_ATOMIC);
static_assert(static_cast<int>(wc_status::rem_access_err) == IBV_WC_REM_ACCESS_ERR);
static_assert(static_cast<int>(wc_status::general_err) == IBV_WC_GENERAL_ERR);
static_assert(static_cast<int>(wc_status::rnr_retry_exc_err) == IBV_WC_RNR_RETRY_EXC_ERR);
static_assert(static_cast<int>(wc_opcode::atomic_write) == IBV_WC_ATOMIC_WRITE);
static_assert(static_cast<int>(wc_opcode::recv_rdma_with_imm) == IBV_WC_RECV_RDMA_WITH_IMM);

cm_event_type translate(rdma_cm_event_type type) noexcept {
  switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: return cm_event_type::addr_resolved;
    case RDMA_CM_EVENT_ADDR_ERROR: return cm_event_type::addr_error;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: return cm_event_type::route_resolved;
    case RDMA_CM_EVENT_ROUTE_ERROR: return cm_event_type::route_error;
    case RDMA_CM_EVENT_CONNECT_REQUEST: return cm_event_type::connect_request;
    case RDMA_CM_EVENT_CONNECT_RESPONSE: return cm_event_type::connect_response;
    case RDMA_CM_EVENT_CONNECT_ERROR: return cm_event_type::connect_error;
    case RDMA_CM_EVENT_UNREACHABLE: return cm_event_type::unreachable;
    case RDMA_CM_EVENT_REJECTED: return cm_event_type::rejected;
    case RDMA_CM_EVENT_ESTABLISHED: return cm_event_type::established;
    case RDMA_CM_EVENT_DISCONNECTED: return cm_event_type::disconnected;
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return cm_event_type::device_removal;
    case RDMA_CM_EVENT_ADDR_CHANGE: return cm_event_type::addr_change;
    case RDMA_CM_EVENT_TIMEWAIT_EXIT: return cm_event_type::timewait_exit;
    default: return cm_event_type::other;
  }
}

// Frees rdma_getaddrinfo results on every path.
struct addrinfo_guard {
  rdma_addrinfo* info = nullptr;
  ~addrinfo_guard() {
    if (info != nullptr) rdma_freeaddrinfo(info);
  }
};

}  // namespace

bool verbs_provider::owns(const device* dev) const noexcept {
  if (dev == nullptr) return false;
  // The list names every context find_device can hand out (rdma_cm ids use
  // these); comparing pointers never reads through a foreign one.
  int count = 0;
  ibv_context** contexts = rdma_get_devices(&count);
  if (contexts == nullptr) return false;
  const bool known = std::find(contexts, contexts + count, dev) != contexts + count;
  rdma_free_devices(contexts);
  return known;
}

result<device*> verbs_provider::find_device(const char* addr, bool remote) {
  rdma_addrinfo hints{};
  hints.ai_flags = remote ? 0 : RAI_PASSIVE;
  hints.ai_qp_type = IBV_QPT_RC;
  hints.ai_port_space = RDMA_PS_TCP;
  addrinfo_guard info;
  if (const int rc = rdma_getaddrinfo(addr, nullptr, &hints, &info.info); rc != 0) {
    // -1 with errno (e.g. ENODEV: no RDMA device), or an EAI_* code.
    const bool has_errno = rc == -1 || rc == EAI_SYSTEM;
    const std::error_code ec =
        has_errno ? last_error() : std::make_error_code(std::errc::address_not_available);
    if (has_errno)
      ARPMA_LOG_FAILURE("rdma_getaddrinfo", ec);
    else
      ARPMA_LOG(log_level::error, "rdma_getaddrinfo(%s): %s", addr, gai_strerror(rc));
    return ec;
  }
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP) != 0) {
    const auto ec = last_error();
    ARPMA_LOG_FAILURE("rdma_create_id", ec);
    return ec;
  }
  const int rc = remote
                     ? rdma_resolve_addr(id, info.info->ai_src_addr, info.info->ai_dst_addr, 1000)
                     : rdma_bind_addr(id, info.info->ai_src_addr);
  const std::error_code ec = rc != 0 ? last_error() : std::error_code{};
  device* dev = id->verbs;
  rdma_destroy_id(id);
  if (ec) {
    ARPMA_LOG_FAILURE(remote ? "rdma_resolve_addr" : "rdma_bind_addr", ec);
    return ec;
  }
  if (dev == nullptr) {
    // Bound to a wildcard or non-RDMA address: no device owns it.
    const auto none = std::make_error_code(std::errc::no_such_device);
    ARPMA_LOG_FAILURE("no RDMA device for the address", none);
    return none;
  }
  return dev;
}

result<event_channel*> verbs_provider::create_event_channel() {
  // Left blocking, as rdma_cm makes it (see provider.hpp).
  rdma_event_channel* channel = rdma_create_event_channel();
  if (channel == nullptr) return last_error();
  return reinterpret_cast<event_channel*>(channel);
}

void verbs_provider::destroy_event_channel(event_channel* channel) noexcept {
  rdma_destroy_event_channel(native(channel));
}

int verbs_provider::event_channel_fd(const event_channel* channel) const noexcept {
  return native(channel)->fd;
}

std::error_code verbs_provider::get_cm_event(event_channel* channel, cm_event& out) {
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(native(channel), &event) != 0) return last_error();
  out.type = translate(event->event);
  out.id = reinterpret_cast<cm_id*>(event->id);
  if (event->event == RDMA_CM_EVENT_ESTABLISHED) shorten_rnr_wait(event->id);
  const rdma_cm_id* owner = event->listen_id != nullptr ? event->listen_id : event->id;
  out.context = reinterpret_cast<std::uintptr_t>(owner->context);
  out.status = event->status;
  const auto& conn = event->param.conn;
  out.private_data_len = conn.private_data != nullptr ? conn.private_data_len : 0;
  if (out.private_data_len > 0)
    std::memcpy(out.private_data.data(), conn.private_data, out.private_data_len);
  // Acknowledged at once: a pending event would block migrate/destroy of its id.
  rdma_ack_cm_event(event);
  return {};
}

result<cm_id*> verbs_provider::create_id(event_channel* channel, std::uint64_t context) {
  rdma_cm_id* id = nullptr;
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the context is an opaque token
  auto* ctx = reinterpret_cast<void*>(static_cast<std::uintptr_t>(context));
  if (rdma_create_id(native(channel), &id, ctx, RDMA_PS_TCP) != 0) return last_error();
  return reinterpret_cast<cm_id*>(id);
}

std::error_code verbs_provider::destroy_id(cm_id* id) noexcept {
  return rdma_destroy_id(native(id)) != 0 ? last_error() : std::error_code{};
}

std::error_code verbs_provider::resolve_addr(cm_id* id, const sockaddr* dst, int timeout_ms) {
  return rdma_resolve_addr(native(id), nullptr, const_cast<sockaddr*>(dst), timeout_ms) != 0
             ? last_error()
             : std::error_code{};
}

std::error_code verbs_provider::resolve_route(cm_id* id, int timeout_ms) {
  return rdma_resolve_route(native(id), timeout_ms) != 0 ? last_error() : std::error_code{};
}

device* verbs_provider::id_device(const cm_id* id) const noexcept { return native(id)->verbs; }

std::error_code verbs_provider::bind_addr(cm_id* id, const sockaddr* addr) {
  return rdma_bind_addr(native(id), const_cast<sockaddr*>(addr)) != 0 ? last_error()
                                                                      : std::error_code{};
}

std::error_code verbs_provider::listen(cm_id* id, int backlog) {
  return rdma_listen(native(id), backlog) != 0 ? last_error() : std::error_code{};
}

std::uint16_t verbs_provider::local_port(const cm_id* id) const noexcept {
  return ntohs(rdma_get_src_port(const_cast<rdma_cm_id*>(native(id))));
}

namespace {
rdma_conn_param to_native(const conn_param& p) noexcept {
  rdma_conn_param out{};
  out.private_data = p.private_data;
  out.private_data_len = p.private_data_len;
  out.responder_resources = p.responder_resources;
  out.initiator_depth = p.initiator_depth;
  out.flow_control = p.flow_control;
  out.retry_count = p.retry_count;
  out.rnr_retry_count = p.rnr_retry_count;
  return out;
}
}  // namespace

std::error_code verbs_provider::connect(cm_id* id, const conn_param& param) {
  rdma_conn_param native_param = to_native(param);
  return rdma_connect(native(id), &native_param) != 0 ? last_error() : std::error_code{};
}

std::error_code verbs_provider::accept(cm_id* id, const conn_param& param) {
  rdma_conn_param native_param = to_native(param);
  if (rdma_accept(native(id), &native_param) != 0) return last_error();
  shorten_rnr_wait(native(id));  // RTS already on IB and RoCE: before the client's first SEND
  return {};
}

std::error_code verbs_provider::reject(cm_id* id, const void* private_data, std::uint8_t len) {
  return rdma_reject(native(id), private_data, len) != 0 ? last_error() : std::error_code{};
}

std::error_code verbs_provider::disconnect(cm_id* id) {
  return rdma_disconnect(native(id)) != 0 ? last_error() : std::error_code{};
}

std::error_code verbs_provider::migrate_id(cm_id* id, event_channel* channel) {
  return rdma_migrate_id(native(id), native(channel)) != 0 ? last_error() : std::error_code{};
}

void verbs_provider::set_context(cm_id* id, std::uint64_t context) noexcept {
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the context is an opaque token
  native(id)->context = reinterpret_cast<void*>(static_cast<std::uintptr_t>(context));
}

result<pd*> verbs_provider::alloc_pd(device* dev) {
  errno = 0;
  ibv_pd* p = ibv_alloc_pd(dev);
  if (p == nullptr) return last_error();
  return reinterpret_cast<pd*>(p);
}

std::error_code verbs_provider::dealloc_pd(pd* p) noexcept {
  return from_status(ibv_dealloc_pd(native(p)));
}

result<comp_channel*> verbs_provider::create_comp_channel(device* dev) {
  ibv_comp_channel* channel = ibv_create_comp_channel(dev);  // blocking, as the event channels
  if (channel == nullptr) return last_error();
  return reinterpret_cast<comp_channel*>(channel);
}

std::error_code verbs_provider::destroy_comp_channel(comp_channel* channel) noexcept {
  return from_status(ibv_destroy_comp_channel(native(channel)));
}

int verbs_provider::comp_channel_fd(const comp_channel* channel) const noexcept {
  return native(channel)->fd;
}

result<cq*> verbs_provider::create_cq(device* dev, int cqe, comp_channel* channel) {
  ibv_cq* c = ibv_create_cq(dev, cqe, nullptr, native(channel), 0);
  if (c == nullptr) return last_error();
  return reinterpret_cast<cq*>(c);
}

std::error_code verbs_provider::destroy_cq(cq* c) noexcept {
  return from_status(ibv_destroy_cq(native(c)));
}

std::error_code verbs_provider::req_notify_cq(cq* c, bool solicited_only) {
  return from_status(ibv_req_notify_cq(native(c), solicited_only ? 1 : 0));
}

std::error_code verbs_provider::create_qp(cm_id* id, pd* p, const qp_config& config) {
  ibv_qp_init_attr_ex attr{};
  attr.send_cq = native(config.send_cq);
  attr.recv_cq = native(config.recv_cq);
  attr.cap.max_send_wr = config.max_send_wr;
  attr.cap.max_recv_wr = config.max_recv_wr;
  attr.cap.max_send_sge = config.max_sge;
  attr.cap.max_recv_sge = config.max_sge;
  attr.cap.max_inline_data = config.max_inline_data;
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 0;
  attr.comp_mask = IBV_QP_INIT_ATTR_PD;
  attr.pd = native(p);
  attr.srq = reinterpret_cast<ibv_srq*>(config.shared_rq);
  // Atomic write needs the extended send ops, asked for only where the
  // device has it; a device that still refuses gets the QP made as before.
  if (!caps(native(id)->verbs).native_atomic_write)
    return rdma_create_qp_ex(native(id), &attr) != 0 ? last_error() : std::error_code{};
  ibv_qp_init_attr_ex with_ops = attr;
  with_ops.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  with_ops.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
                            IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_WRITE;
  if (rdma_create_qp_ex(native(id), &with_ops) == 0) return {};
  return rdma_create_qp_ex(native(id), &attr) != 0 ? last_error() : std::error_code{};
}

void verbs_provider::destroy_qp(cm_id* id) noexcept { rdma_destroy_qp(native(id)); }

std::uint32_t verbs_provider::qp_num(const cm_id* id) const noexcept {
  const ibv_qp* qp = native(id)->qp;
  return qp != nullptr ? qp->qp_num : 0;
}

// ---- data path ------------------------------------------------------------------

namespace {

ibv_wr_opcode native_opcode(wr_opcode op) noexcept {
  switch (op) {
    case wr_opcode::send: return IBV_WR_SEND;
    case wr_opcode::send_with_imm: return IBV_WR_SEND_WITH_IMM;
    case wr_opcode::rdma_write: return IBV_WR_RDMA_WRITE;
    case wr_opcode::rdma_write_with_imm: return IBV_WR_RDMA_WRITE_WITH_IMM;
    case wr_opcode::rdma_read: return IBV_WR_RDMA_READ;
    case wr_opcode::atomic_write: return IBV_WR_ATOMIC_WRITE;
    case wr_opcode::flush: break;
  }
  return IBV_WR_DRIVER1;  // never posted
}

ibv_sge native_sge(const sge& s) noexcept { return {s.addr, s.length, s.lkey}; }

// ATOMIC_WRITE exists only as an ibv_qp_ex operation. Without it, librpma
// writes the 8 bytes inline with an ordinary RDMA write (8 bytes, aligned:
// placed as one unit by every RDMA NIC in practice); so does this.
std::error_code post_inline_write(ibv_qp* qp, const send_wr& wr) noexcept {
  ibv_sge sg{reinterpret_cast<std::uintptr_t>(wr.atomic_value.data()),  // NOLINT: copied at post
             static_cast<std::uint32_t>(wr.atomic_value.size()), 0};
  ibv_send_wr native_wr{};
  native_wr.wr_id = wr.wr_id;
  native_wr.opcode = IBV_WR_RDMA_WRITE;
  native_wr.send_flags = IBV_SEND_INLINE | (wr.signaled ? IBV_SEND_SIGNALED : 0);
  native_wr.sg_list = &sg;
  native_wr.num_sge = 1;
  native_wr.wr.rdma.remote_addr = wr.remote_addr;
  native_wr.wr.rdma.rkey = wr.rkey;
  ibv_send_wr* bad = nullptr;
  return from_status(ibv_post_send(qp, &native_wr, &bad));
}

// The kernel's capability bit for atomic write (IB_UVERBS_DEVICE_ATOMIC_WRITE,
// Linux 6.2 UAPI), which rdma-core 44's headers do not name yet. A device
// without it accepts the QP flag but fails the operation (rdma_rxe on 6.1:
// LOC_QP_OP_ERR), so the bit is what decides.
constexpr std::uint64_t device_atomic_write = std::uint64_t{1} << 40;

// ATOMIC_WRITE exists only as an ibv_qp_ex operation.
// (The QP is created with IBV_QP_EX_WITH_ATOMIC_WRITE where the device has it.)
std::error_code post_atomic_write(ibv_qp* qp, const send_wr& wr) noexcept {
  ibv_qp_ex* qpx = ibv_qp_to_qp_ex(qp);
  if (qpx == nullptr || qpx->wr_atomic_write == nullptr) return post_inline_write(qp, wr);
  ibv_wr_start(qpx);
  qpx->wr_id = wr.wr_id;
  qpx->wr_flags = wr.signaled ? IBV_SEND_SIGNALED : 0;
  ibv_wr_atomic_write(qpx, wr.rkey, wr.remote_addr, wr.atomic_value.data());
  return from_status(ibv_wr_complete(qpx));
}

work_completion translate(const ibv_wc& wc) noexcept {
  work_completion out;
  out.wr_id = wc.wr_id;
  out.status = static_cast<wc_status>(wc.status);
  out.opcode = static_cast<wc_opcode>(wc.opcode);
  out.byte_len = wc.byte_len;
  out.with_imm = (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
  out.imm_data = out.with_imm ? ntohl(wc.imm_data) : 0;
  out.qp_num = wc.qp_num;
  out.vendor_err = wc.vendor_err;
  return out;
}

}  // namespace

device_caps verbs_provider::caps(const device* dev) const noexcept {
  if (dev == nullptr) return {};
  const std::lock_guard lock(caps_mutex_);
  if (const auto it = caps_.find(dev); it != caps_.end()) return it->second;
  device_caps found;
  found.immediate_data = dev->device->transport_type != IBV_TRANSPORT_IWARP;
  ibv_device_attr_ex attr{};
  if (ibv_query_device_ex(const_cast<device*>(dev), nullptr, &attr) == 0) {
    found.native_atomic_write = (attr.device_cap_flags_ex & device_atomic_write) != 0;
    constexpr std::uint32_t rc_rw = IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_WRITE;
    found.odp = (attr.odp_caps.general_caps & IBV_ODP_SUPPORT) != 0 &&
                (attr.odp_caps.per_transport_caps.rc_odp_caps & rc_rw) == rc_rw;
  }
  // rdma-core 44 has no flush verb, whatever the device can do.
  try {
    caps_.emplace(dev, found);
  } catch (const std::bad_alloc&) {
    // asked again next time
  }
  return found;
}

result<mr*> verbs_provider::reg_mr(pd* p, void* addr, std::size_t length, int access) {
  errno = 0;
  ibv_mr* m = ibv_reg_mr(native(p), addr, length, access);
  if (m == nullptr) return last_error();
  return reinterpret_cast<mr*>(m);
}

std::error_code verbs_provider::dereg_mr(mr* m) noexcept {
  return from_status(ibv_dereg_mr(native(m)));
}

std::error_code verbs_provider::advise_mr(mr* m, std::size_t offset, std::uint32_t length,
                                          int advice, std::uint32_t flags) {
  ibv_mr* native_mr = native(m);
  ibv_sge sg{};
  sg.addr = reinterpret_cast<std::uintptr_t>(native_mr->addr) + offset;  // NOLINT: for the NIC
  sg.length = length;
  sg.lkey = native_mr->lkey;
  // Returns the errno itself (EOPNOTSUPP where the driver has no ODP).
  return from_status(
      ibv_advise_mr(native_mr->pd, static_cast<ibv_advise_mr_advice>(advice), flags, &sg, 1));
}

std::uint32_t verbs_provider::mr_lkey(const mr* m) const noexcept { return native(m)->lkey; }
std::uint32_t verbs_provider::mr_rkey(const mr* m) const noexcept { return native(m)->rkey; }

std::error_code verbs_provider::post_send(cm_id* id, const send_wr& wr) {
  ibv_qp* qp = native(id)->qp;
  if (qp == nullptr) return std::make_error_code(std::errc::invalid_argument);
  if (wr.opcode == wr_opcode::flush)
    return std::make_error_code(std::errc::operation_not_supported);
  if (wr.opcode == wr_opcode::atomic_write) {
    // Without the device capability (rxe on Linux 6.1), librpma's fallback.
    if (!caps(qp->context).native_atomic_write) return post_inline_write(qp, wr);
    return post_atomic_write(qp, wr);
  }
  ibv_sge sg = native_sge(wr.local);
  ibv_send_wr native_wr{};
  native_wr.wr_id = wr.wr_id;
  native_wr.opcode = native_opcode(wr.opcode);
  native_wr.send_flags = wr.signaled ? IBV_SEND_SIGNALED : 0;
  native_wr.sg_list = &sg;
  native_wr.num_sge = wr.local.length > 0 ? 1 : 0;
  native_wr.imm_data = htonl(wr.imm);
  native_wr.wr.rdma.remote_addr = wr.remote_addr;
  native_wr.wr.rdma.rkey = wr.rkey;
  ibv_send_wr* bad = nullptr;
  return from_status(ibv_post_send(qp, &native_wr, &bad));
}

std::error_code verbs_provider::post_recv(cm_id* id, const recv_wr& wr) {
  ibv_qp* qp = native(id)->qp;
  if (qp == nullptr) return std::make_error_code(std::errc::invalid_argument);
  ibv_sge sg = native_sge(wr.local);
  ibv_recv_wr native_wr{};
  native_wr.wr_id = wr.wr_id;
  native_wr.sg_list = &sg;
  native_wr.num_sge = wr.local.length > 0 ? 1 : 0;
  ibv_recv_wr* bad = nullptr;
  return from_status(ibv_post_recv(qp, &native_wr, &bad));
}

result<std::size_t> verbs_provider::poll_cq(cq* c, std::span<work_completion> out) {
  constexpr std::size_t batch = 16;
  // Not cleared: ibv_poll_cq fills the entries it returns, and clearing 16
  // of them per poll shows in the latency of one write on an emulated CPU.
  std::array<ibv_wc, batch> wcs;  // NOLINT(cppcoreguidelines-pro-type-member-init)
  std::size_t done = 0;
  while (done < out.size()) {
    const int want = static_cast<int>(std::min(batch, out.size() - done));
    const int got = ibv_poll_cq(native(c), want, wcs.data());
    if (got < 0) return from_status(got);
    for (int i = 0; i < got; ++i) out[done++] = translate(wcs[static_cast<std::size_t>(i)]);
    if (got < want) break;
  }
  return done;
}

result<cq*> verbs_provider::get_cq_event(comp_channel* channel) {
  ibv_cq* fired = nullptr;
  void* context = nullptr;
  if (ibv_get_cq_event(native(channel), &fired, &context) != 0) return last_error();
  return reinterpret_cast<cq*>(fired);
}

void verbs_provider::ack_cq_events(cq* c, unsigned count) noexcept {
  ibv_ack_cq_events(native(c), count);
}

result<srq*> verbs_provider::create_srq(pd* p, std::uint32_t max_wr, std::uint32_t max_sge) {
  ibv_srq_init_attr attr{};
  attr.attr.max_wr = max_wr;
  attr.attr.max_sge = max_sge;
  errno = 0;
  ibv_srq* s = ibv_create_srq(native(p), &attr);
  if (s == nullptr) return last_error();
  return reinterpret_cast<srq*>(s);
}

std::error_code verbs_provider::destroy_srq(srq* s) noexcept {
  return from_status(ibv_destroy_srq(native(s)));
}

std::error_code verbs_provider::post_srq_recv(srq* s, const recv_wr& wr) {
  ibv_sge sg = native_sge(wr.local);
  ibv_recv_wr native_wr{};
  native_wr.wr_id = wr.wr_id;
  native_wr.sg_list = &sg;
  native_wr.num_sge = wr.local.length > 0 ? 1 : 0;
  ibv_recv_wr* bad = nullptr;
  return from_status(ibv_post_srq_recv(native(s), &native_wr, &bad));
}

}  // namespace arpma::provider
