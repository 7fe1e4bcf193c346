// The soft provider's data path: MR table, requester and responder, which
// share the QP's lock, the MR table's lock discipline (shared while registered
// memory is touched) and the completion helpers private to this file. Polling
// and arming CQs: soft_datapath_cq.cpp.
// Over 700 lines on purpose: the in-place receive of large SENDs and READ
// responses (placing_recv, send_placed, placing_read, read_placed) completes
// through the same file-private helpers as the buffered path (deliver,
// read_done, take_recv, the MR lookup); moving it out means exposing those in
// a private header, left for when the file grows again.
#include "provider/soft/soft_datapath.hpp"

#include "provider/handle_cast.hpp"
#include "provider/soft/soft_memory.hpp"
#include "provider/soft/soft_mr.hpp"
#include "provider/soft/soft_provider.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <optional>
#include <random>
#include <shared_mutex>
#include <unordered_map>

namespace arpma::provider::soft_dp {
namespace {

using namespace soft_wire;  // NOLINT(google-build-using-namespace): the frame vocabulary

std::error_code sys(int err) noexcept { return {err, std::system_category()}; }

// ---- memory regions ------------------------------------------------------------

/// Every MR of the process. Remote and local accesses hold the shared lock
/// while they touch registered memory, so once dereg (exclusive) returns, no
/// byte of the region is touched again.
struct mr_table {
  std::shared_mutex mutex;
  std::unordered_map<std::uint32_t, soft_mr*> by_rkey;
  std::unordered_map<std::uint32_t, soft_mr*> by_lkey;
  std::random_device entropy;  ///< keys must not be guessable from earlier ones
};

mr_table& table() {
  static mr_table instance;
  return instance;
}

std::uint32_t fresh_key(mr_table& t, const std::unordered_map<std::uint32_t, soft_mr*>& used) {
  for (;;) {
    const auto key = static_cast<std::uint32_t>(t.entropy());
    if (key != 0 && !used.contains(key)) return key;
  }
}

soft_mr* find(const std::unordered_map<std::uint32_t, soft_mr*>& keys, std::uint32_t key) {
  const auto it = keys.find(key);
  return it == keys.end() ? nullptr : it->second;
}

// ---- completions -----------------------------------------------------------------

void complete(soft_cq& cq, const work_completion& wc) {
  const std::lock_guard lock(cq.mutex);
  cq.entries.push_back(wc);
  if (cq.armed && cq.channel != nullptr) {
    cq.armed = false;
    fire(*cq.channel, cq);
  }
}

void complete_send(soft_qp& qp, const outstanding& o, wc_status status) {
  if (status == wc_status::success && !o.signaled) return;
  work_completion wc;
  wc.wr_id = o.wr_id;
  wc.status = status;
  wc.opcode = o.opcode;
  wc.byte_len = o.byte_len;
  wc.qp_num = qp.num;
  complete(*qp.send_cq, wc);
}

work_completion recv_completion(const soft_qp& qp, const recv_wr& r, wc_status status) {
  work_completion wc;
  wc.wr_id = r.wr_id;
  wc.status = status;
  wc.opcode = wc_opcode::recv;
  wc.qp_num = qp.num;
  return wc;
}

/// Verbs' error state: everything outstanding completes with WR_FLUSH_ERR.
/// Called with the QP's mutex held.
void flush_all(soft_qp& qp) {
  qp.state = qp_state::error;
  for (const outstanding& o : qp.sq) complete_send(qp, o, wc_status::wr_flush_err);
  qp.sq.clear();
  for (const recv_wr& r : qp.rq)
    complete(*qp.recv_cq, recv_completion(qp, r, wc_status::wr_flush_err));
  qp.rq.clear();
  qp.held.clear();
  qp.reads_out = 0;
  qp.halted = false;
}

/// A WR that failed locally completes once every WR before it has.
void retire_local_errors(soft_qp& qp) {
  if (qp.sq.empty() || qp.sq.front().local_error == wc_status::success) return;
  const outstanding failed = qp.sq.front();
  qp.sq.pop_front();
  complete_send(qp, failed, failed.local_error);
  flush_all(qp);
}

frame small_frame(frame_type type, std::uint32_t value) {
  std::array<std::uint8_t, 4> fixed{};
  put_u32(fixed.data(), value);
  return make_frame(type, fixed.data(), fixed.size(), nullptr, 0);
}

// ---- requester -------------------------------------------------------------------

wc_opcode completion_opcode(wr_opcode op) noexcept {
  switch (op) {
    case wr_opcode::send:
    case wr_opcode::send_with_imm: return wc_opcode::send;
    case wr_opcode::rdma_write:
    case wr_opcode::rdma_write_with_imm: return wc_opcode::rdma_write;
    case wr_opcode::rdma_read: return wc_opcode::rdma_read;
    case wr_opcode::atomic_write: return wc_opcode::atomic_write;
    case wr_opcode::flush: return wc_opcode::flush;
  }
  return wc_opcode::send;
}

bool valid(const send_wr& wr) noexcept {
  switch (wr.opcode) {
    case wr_opcode::send:
    case wr_opcode::send_with_imm:
    case wr_opcode::rdma_write:
    case wr_opcode::rdma_write_with_imm:
    case wr_opcode::rdma_read: return wr.local.length <= max_message;
    case wr_opcode::atomic_write: return true;
    case wr_opcode::flush: return wr.flush <= flush_type::persistent && wr.level <= flush_level::mr;
  }
  return false;
}

struct request_layout {
  frame_type type = frame_type::send;
  std::array<std::uint8_t, flush_size> fixed{};
  std::size_t fixed_len = 0;
  bool carries_data = false;
};

void put_remote(request_layout& l, const send_wr& wr) {
  put_u32(l.fixed.data(), wr.rkey);
  put_u64(l.fixed.data() + 4, wr.remote_addr);
  l.fixed_len = remote_size;
}

request_layout layout_of(const send_wr& wr) {
  request_layout l;
  switch (wr.opcode) {
    case wr_opcode::send: l.carries_data = true; break;
    case wr_opcode::send_with_imm:
      l.type = frame_type::send_imm;
      put_u32(l.fixed.data(), wr.imm);
      l.fixed_len = 4;
      l.carries_data = true;
      break;
    case wr_opcode::rdma_write:
      l.type = frame_type::write;
      put_remote(l, wr);
      l.carries_data = true;
      break;
    case wr_opcode::rdma_write_with_imm:
      l.type = frame_type::write_imm;
      put_remote(l, wr);
      put_u32(l.fixed.data() + remote_size, wr.imm);
      l.fixed_len = remote_size + 4;
      l.carries_data = true;
      break;
    case wr_opcode::rdma_read:
      l.type = frame_type::read_req;
      put_remote(l, wr);
      put_u32(l.fixed.data() + remote_size, wr.local.length);
      l.fixed_len = read_req_size;
      break;
    case wr_opcode::atomic_write:
      l.type = frame_type::atomic_write;
      put_remote(l, wr);
      std::copy(wr.atomic_value.begin(), wr.atomic_value.end(), l.fixed.begin() + remote_size);
      l.fixed_len = atomic_write_size;
      break;
    case wr_opcode::flush:
      l.type = frame_type::flush;
      put_remote(l, wr);
      put_u64(l.fixed.data() + remote_size, wr.flush_length);
      l.fixed[remote_size + 8] = static_cast<std::uint8_t>(wr.flush);
      l.fixed[remote_size + 9] = static_cast<std::uint8_t>(wr.level);
      l.fixed_len = flush_size;
      break;
  }
  return l;
}

struct request {
  frame head;                          ///< header and fixed fields
  std::span<const std::uint8_t> data;  ///< the message, in registered memory
};

/// The request of `wr`. Its data is read from where it lies, so the caller
/// holds the MR table's shared lock until the request is written. LOC_PROT_ERR
/// in `status` when the local buffer is not registered for the operation.
request request_of(mr_table& t, const soft_qp& qp, const send_wr& wr, wc_status& status) {
  const request_layout l = layout_of(wr);
  const std::uint8_t* local = nullptr;
  if (wr.local.length > 0) {
    const int need = wr.opcode == wr_opcode::rdma_read ? access::local_write : 0;
    local = within(find(t.by_lkey, wr.local.lkey), qp.pd, wr.local.addr, wr.local.length, need);
    if (local == nullptr) {
      status = wc_status::loc_prot_err;
      return {};
    }
  }
  const std::size_t data_len = l.carries_data ? wr.local.length : 0;
  return {make_head(l.type, l.fixed.data(), l.fixed_len, data_len), {local, data_len}};
}

outstanding describe(const send_wr& wr) noexcept {
  outstanding o;
  o.wr_id = wr.wr_id;
  o.opcode = completion_opcode(wr.opcode);
  o.signaled = wr.signaled;
  o.local = wr.local;
  o.byte_len = wr.opcode == wr_opcode::atomic_write ? 8
               : wr.opcode == wr_opcode::flush      ? 0
                                                    : wr.local.length;
  return o;
}

bool read_slot(const soft_qp& qp) noexcept { return qp.reads_out < qp.link.max_reads_out; }

/// Sends `wr`, whose entry `o` is in the send queue; false when it failed
/// locally instead (later WRs then only wait to be flushed). Called with the
/// QP's mutex and the MR table's shared lock held.
bool start(mr_table& t, soft_qp& qp, const send_wr& wr, outstanding& o) {
  request r = request_of(t, qp, wr, o.local_error);
  if (o.local_error != wc_status::success) {
    o.sent = false;
    qp.halted = true;
    retire_local_errors(qp);
    return false;
  }
  o.sent = true;
  if (wr.opcode == wr_opcode::rdma_read) ++qp.reads_out;
  // Behind a request still awaiting its response this one may wait for the
  // next (the link sends the batch at the latest when that response arrives).
  const bool batch = qp.sq.size() > 1 && qp.sq.front().sent;
  const payload_source source{.pd = qp.pd, .key = wr.local.lkey, .addr = wr.local.addr};
  qp.link.send(std::move(r.head), r.data, source, batch);
  return true;
}

/// A READ was answered: what waited for its slot goes out, in order, until
/// a READ finds none again. Called with the QP's mutex held.
void release_held(soft_qp& qp) {
  if (qp.held.empty() || qp.halted || qp.state != qp_state::ready) return;
  mr_table& t = table();
  const std::shared_lock mrs(t.mutex);
  auto entry =
      std::find_if(qp.sq.begin(), qp.sq.end(), [](const outstanding& o) { return !o.sent; });
  while (!qp.held.empty() && entry != qp.sq.end()) {
    const send_wr wr = qp.held.front();
    if (wr.opcode == wr_opcode::rdma_read && !read_slot(qp)) return;
    qp.held.pop_front();
    if (!start(t, qp, wr, *entry)) return;
    ++entry;
  }
}

// ---- responder -------------------------------------------------------------------

/// A request the responder cannot execute: NAK to the requester, and this QP
/// goes to error so nothing the requester posted later takes effect here.
verdict refuse(soft_qp& qp, wc_status status) {
  qp.link.send(small_frame(frame_type::nak, static_cast<std::uint32_t>(status)), {}, {}, false);
  flush_all(qp);
  return verdict::done;
}

void acknowledge(soft_qp& qp) { qp.link.send(small_frame(frame_type::ack, 1), {}, {}, false); }

bool has_recv(soft_qp& qp) {
  if (qp.srq == nullptr) return !qp.rq.empty();
  const std::lock_guard lock(qp.srq->mutex);
  return !qp.srq->queue.empty();
}

std::optional<recv_wr> take_recv(soft_qp& qp) {
  ring<recv_wr>& queue = qp.srq != nullptr ? qp.srq->queue : qp.rq;
  std::unique_lock<std::mutex> lock;
  if (qp.srq != nullptr) lock = std::unique_lock(qp.srq->mutex);
  if (queue.empty()) return std::nullopt;
  recv_wr r = queue.front();
  queue.pop_front();
  return r;
}

/// A SEND's payload is in receive `r` (status success), or could not be put
/// there: the receive completes, and the sender gets its ACK or a NAK.
verdict deliver(soft_qp& qp, const recv_wr& r, std::size_t len, std::optional<std::uint32_t> imm,
                wc_status status) {
  work_completion wc = recv_completion(qp, r, status);
  wc.byte_len = static_cast<std::uint32_t>(len);
  wc.with_imm = imm.has_value();
  wc.imm_data = imm.value_or(0);
  if (status != wc_status::success) {
    complete(*qp.recv_cq, wc);
    return refuse(
        qp, status == wc_status::loc_len_err ? wc_status::rem_inv_req_err : wc_status::rem_op_err);
  }
  // Acknowledged before the receive completes: an application that reacts to
  // the completion by disconnecting sends its DREQ behind this ACK, so the
  // sender's send completes instead of being flushed.
  acknowledge(qp);
  complete(*qp.recv_cq, wc);
  return verdict::done;
}

verdict execute_send(soft_qp& qp, std::span<const std::uint8_t> data,
                     std::optional<std::uint32_t> imm) {
  const auto r = take_recv(qp);
  if (!r) return verdict::rnr_wait;
  if (data.size() > r->local.length)
    return deliver(qp, *r, data.size(), imm, wc_status::loc_len_err);
  if (!data.empty()) {
    mr_table& t = table();
    const std::shared_lock lock(t.mutex);
    std::uint8_t* dst = within(find(t.by_lkey, r->local.lkey), qp.pd, r->local.addr, data.size(),
                               access::local_write);
    if (dst == nullptr || !soft_mem::copy_to_region(dst, data.data(), data.size()))
      return deliver(qp, *r, data.size(), imm, wc_status::loc_prot_err);
  }
  return deliver(qp, *r, data.size(), imm, wc_status::success);
}

verdict execute_write(soft_qp& qp, std::span<const std::uint8_t> p, bool with_imm) {
  const std::uint32_t rkey = get_u32(p.data());
  const std::uint64_t addr = get_u64(p.data() + 4);
  const std::size_t fixed = with_imm ? remote_size + 4 : remote_size;
  const auto data = p.subspan(fixed);
  if (with_imm && !has_recv(qp)) return verdict::rnr_wait;  // before anything is placed
  if (!data.empty()) {
    mr_table& t = table();
    const std::shared_lock lock(t.mutex);
    std::uint8_t* dst =
        within(find(t.by_rkey, rkey), qp.pd, addr, data.size(), access::remote_write);
    if (dst == nullptr || !soft_mem::copy_to_region(dst, data.data(), data.size()))
      return refuse(qp, wc_status::rem_access_err);
  }
  if (const auto r = with_imm ? take_recv(qp) : std::nullopt) {
    work_completion wc = recv_completion(qp, *r, wc_status::success);
    wc.opcode = wc_opcode::recv_rdma_with_imm;
    wc.byte_len = static_cast<std::uint32_t>(data.size());
    wc.with_imm = true;
    wc.imm_data = get_u32(p.data() + remote_size);
    acknowledge(qp);  // before the completion, as for a send
    complete(*qp.recv_cq, wc);
    return verdict::done;
  }
  acknowledge(qp);
  return verdict::done;
}

verdict execute_read(soft_qp& qp, std::span<const std::uint8_t> p) {
  const std::uint32_t rkey = get_u32(p.data());
  const std::uint64_t addr = get_u64(p.data() + 4);
  const std::uint32_t len = get_u32(p.data() + remote_size);
  if (len > max_message) return verdict::protocol_error;
  // Past the responder resources both ends agreed on: a requester that does
  // not wait for our answers (IB: invalid request); the link closes, so a
  // peer that never reads makes us hold at most max_reads_in responses. The
  // provider's budget over all links is refused the same way.
  if ((qp.link.queued_reads && qp.link.queued_reads() >= qp.link.max_reads_in) ||
      (qp.link.read_budget_spent && qp.link.read_budget_spent())) {
    qp.link.send(
        small_frame(frame_type::nak, static_cast<std::uint32_t>(wc_status::rem_inv_req_err)), {},
        {}, false);
    flush_all(qp);
    return verdict::protocol_error;
  }
  mr_table& t = table();
  const std::shared_lock lock(t.mutex);
  const std::uint8_t* src = nullptr;
  if (len > 0) {
    src = within(find(t.by_rkey, rkey), qp.pd, addr, len, access::remote_read);
    if (src == nullptr) return refuse(qp, wc_status::rem_access_err);
  }
  const payload_source source{.pd = qp.pd, .key = rkey, .remote = true, .addr = addr};
  qp.link.send(make_head(frame_type::read_resp, nullptr, 0, len), {src, len}, source, false);
  return verdict::done;
}

verdict execute_atomic_write(soft_qp& qp, std::span<const std::uint8_t> p) {
  const std::uint32_t rkey = get_u32(p.data());
  const std::uint64_t addr = get_u64(p.data() + 4);
  if (addr % 8 != 0) return refuse(qp, wc_status::rem_inv_req_err);
  std::uint64_t value = 0;
  std::memcpy(&value, p.data() + remote_size, sizeof value);
  {
    mr_table& t = table();
    const std::shared_lock lock(t.mutex);
    std::uint8_t* dst = within(find(t.by_rkey, rkey), qp.pd, addr, 8, access::remote_write);
    // One 8-byte store: a local reader sees the old or the new value, never a mix.
    if (dst == nullptr || !soft_mem::store_u64_to_region(dst, value))
      return refuse(qp, wc_status::rem_access_err);
  }
  acknowledge(qp);
  return verdict::done;
}

/// A persistent flush's write-back; false (the flush then fails) when msync does.
bool persist(const std::uint8_t* start, std::size_t len) noexcept {
  if (len == 0) return true;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<std::uintptr_t>(start) & ~(page - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(start) + len;
  // NOLINTNEXTLINE(performance-no-int-to-ptr): page-aligned start of a registered range
  return ::msync(reinterpret_cast<void*>(first), end - first, MS_SYNC) == 0;
}

verdict execute_flush(soft_qp& qp, std::span<const std::uint8_t> p) {
  const std::uint32_t rkey = get_u32(p.data());
  const std::uint64_t addr = get_u64(p.data() + 4);
  const std::uint64_t len = get_u64(p.data() + remote_size);
  const std::uint8_t type = p[remote_size + 8];
  const std::uint8_t level = p[remote_size + 9];
  if (type > 1 || level > 1) return verdict::protocol_error;
  const int need = type == 1 ? access::flush_persistent : access::flush_global;
  {
    mr_table& t = table();
    const std::shared_lock lock(t.mutex);
    const soft_mr* m = find(t.by_rkey, rkey);
    const bool whole = level == static_cast<std::uint8_t>(flush_level::mr);
    // Level MR covers the whole region whatever the range says.
    const std::uint8_t* start =
        whole ? (m != nullptr
                     ? within(m, qp.pd, reinterpret_cast<std::uintptr_t>(m->addr), m->length, need)
                     : nullptr)
              : within(m, qp.pd, addr, len, need);
    if (start == nullptr) return refuse(qp, wc_status::rem_access_err);
    // Every earlier write was placed before this frame was read (one stream,
    // executed in order); the fence orders them before the acknowledgement.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (type == 1 && !persist(start, whole ? m->length : len))
      return refuse(qp, wc_status::rem_op_err);
  }
  acknowledge(qp);
  return verdict::done;
}

verdict execute(soft_qp& qp, frame_type type, std::span<const std::uint8_t> p) {
  switch (type) {
    case frame_type::send: return execute_send(qp, p, std::nullopt);
    case frame_type::send_imm: return execute_send(qp, p.subspan(4), get_u32(p.data()));
    case frame_type::write: return execute_write(qp, p, false);
    case frame_type::write_imm: return execute_write(qp, p, true);
    case frame_type::read_req: return execute_read(qp, p);
    case frame_type::atomic_write: return execute_atomic_write(qp, p);
    case frame_type::flush: return execute_flush(qp, p);
    default: return verdict::protocol_error;
  }
}

// ---- requester: responses --------------------------------------------------------

bool is_nak_status(std::uint32_t status) noexcept {
  switch (static_cast<wc_status>(status)) {
    case wc_status::rem_inv_req_err:
    case wc_status::rem_access_err:
    case wc_status::rem_op_err:
    case wc_status::rnr_retry_exc_err: return status <= 0xff;
    default: return false;
  }
}

verdict on_ack(soft_qp& qp, std::uint32_t count) {
  if (count == 0) return verdict::protocol_error;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (qp.sq.empty() || !qp.sq.front().sent || qp.sq.front().opcode == wc_opcode::rdma_read)
      return verdict::protocol_error;  // an acknowledgement of nothing we sent
    const outstanding done = qp.sq.front();
    qp.sq.pop_front();
    complete_send(qp, done, wc_status::success);
    retire_local_errors(qp);
  }
  return verdict::done;
}

/// The oldest outstanding request, a READ, has its response in place (or, not
/// `placed`, its local buffer went away): it completes.
verdict read_done(soft_qp& qp, bool placed) {
  const outstanding done = qp.sq.front();
  qp.sq.pop_front();
  --qp.reads_out;
  if (!placed) {
    complete_send(qp, done, wc_status::loc_prot_err);
    flush_all(qp);
    return verdict::done;
  }
  complete_send(qp, done, wc_status::success);
  retire_local_errors(qp);
  release_held(qp);
  return verdict::done;
}

bool awaits_read(const soft_qp& qp, std::size_t len) {
  return !qp.sq.empty() && qp.sq.front().sent && qp.sq.front().opcode == wc_opcode::rdma_read &&
         len == qp.sq.front().local.length;
}

verdict on_read_response(soft_qp& qp, std::span<const std::uint8_t> data) {
  if (!awaits_read(qp, data.size())) return verdict::protocol_error;
  if (!data.empty()) {
    const outstanding& front = qp.sq.front();
    mr_table& t = table();
    const std::shared_lock lock(t.mutex);
    std::uint8_t* dst = within(find(t.by_lkey, front.local.lkey), qp.pd, front.local.addr,
                               data.size(), access::local_write);
    // Deregistered since the post, or unmapped by the application.
    if (dst == nullptr || !soft_mem::copy_to_region(dst, data.data(), data.size()))
      return read_done(qp, false);
  }
  return read_done(qp, true);
}

verdict on_response(soft_qp& qp, frame_type type, std::span<const std::uint8_t> p) {
  if (qp.state != qp_state::ready) return verdict::done;  // flushed already
  switch (type) {
    case frame_type::ack: return on_ack(qp, get_u32(p.data()));
    case frame_type::read_resp: return on_read_response(qp, p);
    case frame_type::nak: {
      const std::uint32_t status = get_u32(p.data());
      if (!is_nak_status(status) || qp.sq.empty() || !qp.sq.front().sent)
        return verdict::protocol_error;
      const outstanding failed = qp.sq.front();
      qp.sq.pop_front();
      complete_send(qp, failed, static_cast<wc_status>(status));
      flush_all(qp);
      return verdict::done;
    }
    default: return verdict::protocol_error;
  }
}

}  // namespace

// ---- memory regions ------------------------------------------------------------------

result<mr*> register_mr(soft_pd* pd, void* addr, std::size_t length, int access) {
  if (pd == nullptr || addr == nullptr || length == 0) return sys(EINVAL);
  // What ibv_reg_mr refuses (it pins the pages, for writing when the access
  // lets anyone write): a wrapping range, unmapped or unwritable pages.
  constexpr int writes = access::local_write | access::remote_write | access::remote_atomic;
  if (auto ec = soft_mem::check_registrable(addr, length, (access & writes) != 0)) return ec;
  auto m = std::make_unique<soft_mr>();
  m->pd = pd;
  m->addr = static_cast<std::uint8_t*>(addr);
  m->length = length;
  m->access = access;
  mr_table& t = table();
  const std::lock_guard lock(t.mutex);
  m->rkey = fresh_key(t, t.by_rkey);
  m->lkey = fresh_key(t, t.by_lkey);
  t.by_rkey.emplace(m->rkey, m.get());
  t.by_lkey.emplace(m->lkey, m.get());
  ++pd->users;
  return handle<mr>(m.release());
}

std::error_code deregister_mr(mr* h) noexcept {
  std::unique_ptr<soft_mr> m(as<soft_mr>(h));
  mr_table& t = table();
  {
    // Waits for every access in progress; none starts afterwards.
    const std::lock_guard lock(t.mutex);
    t.by_rkey.erase(m->rkey);
    t.by_lkey.erase(m->lkey);
  }
  --m->pd->users;
  return {};
}

std::uint32_t lkey_of(const mr* h) noexcept { return as<const soft_mr>(h)->lkey; }
std::uint32_t rkey_of(const mr* h) noexcept { return as<const soft_mr>(h)->rkey; }

// ---- posting ---------------------------------------------------------------------------

std::error_code post_send(soft_qp& qp, const send_wr& wr) {
  if (!valid(wr)) return sys(EINVAL);
  const std::lock_guard lock(qp.mutex);
  if (qp.state == qp_state::reset || qp.state == qp_state::destroyed) return sys(EINVAL);
  if (qp.sq.size() >= qp.caps.max_send_wr) return sys(ENOMEM);
  outstanding o = describe(wr);
  if (qp.state == qp_state::error) {
    complete_send(qp, o, wc_status::wr_flush_err);
    return {};
  }
  if (qp.halted) {  // behind a local error: flushed when it surfaces
    o.sent = false;
    qp.sq.push_back(o);
    return {};
  }
  if (!qp.held.empty() || (wr.opcode == wr_opcode::rdma_read && !read_slot(qp))) {
    o.sent = false;
    qp.sq.push_back(o);
    qp.held.push_back(wr);
    return {};
  }
  mr_table& t = table();
  const std::shared_lock mrs(t.mutex);  // the data is read from the MR while it is written
  qp.sq.push_back(o);
  (void)start(t, qp, wr, qp.sq.back());
  return {};
}

std::error_code post_recv(soft_qp& qp, const recv_wr& wr) {
  if (qp.srq != nullptr) return sys(EINVAL);
  const std::lock_guard lock(qp.mutex);
  if (qp.state == qp_state::destroyed) return sys(EINVAL);
  if (qp.state == qp_state::error) {
    complete(*qp.recv_cq, recv_completion(qp, wr, wc_status::wr_flush_err));
    return {};
  }
  if (qp.rq.size() >= qp.caps.max_recv_wr) return sys(ENOMEM);
  qp.rq.push_back(wr);
  return {};
}

std::error_code post_srq_recv(soft_srq& srq, const recv_wr& wr) {
  const std::lock_guard lock(srq.mutex);
  if (srq.queue.size() >= srq.max_wr) return sys(ENOMEM);
  srq.queue.push_back(wr);
  return {};
}

// ---- QP state ----------------------------------------------------------------------------

void make_ready(soft_qp& qp, link_ops link) {
  const std::lock_guard lock(qp.mutex);
  if (qp.state != qp_state::reset) return;
  // Zero would mean no READ at all; the soft device always allows one.
  link.max_reads_out = std::clamp<std::uint32_t>(link.max_reads_out, 1, max_reads_in_flight);
  link.max_reads_in = std::clamp<std::uint32_t>(link.max_reads_in, 1, max_reads_in_flight);
  qp.link = std::move(link);
  qp.state = qp_state::ready;
}

void to_error(soft_qp& qp) {
  const std::lock_guard lock(qp.mutex);
  if (qp.state == qp_state::destroyed) return;
  flush_all(qp);
}

void destroy(soft_qp& qp) {
  const std::lock_guard lock(qp.mutex);
  qp.state = qp_state::destroyed;
  qp.sq.clear();
  qp.rq.clear();
  qp.held.clear();
  qp.link = {};
}

verdict on_frame(soft_qp& qp, frame_type type, std::span<const std::uint8_t> payload) {
  const std::lock_guard lock(qp.mutex);
  if (!is_request(type)) return on_response(qp, type, payload);
  // An unconnected, failed or destroyed QP executes nothing (verbs drops
  // what reaches a QP in error).
  if (qp.state != qp_state::ready) return verdict::done;
  return execute(qp, type, payload);
}

bool executes_requests(soft_qp& qp) {
  const std::lock_guard lock(qp.mutex);
  return qp.state == qp_state::ready;
}

std::shared_lock<std::shared_mutex> lock_memory() { return std::shared_lock(table().mutex); }

const std::uint8_t* payload_at(const payload_source& source, std::size_t len) {
  mr_table& t = table();
  return within(find(source.remote ? t.by_rkey : t.by_lkey, source.key), source.pd, source.addr,
                len, source.remote ? access::remote_read : 0);
}

std::uint8_t* write_destination(const soft_qp& qp, std::uint32_t rkey, std::uint64_t addr,
                                std::size_t len) {
  mr_table& t = table();
  return within(find(t.by_rkey, rkey), qp.pd, addr, len, access::remote_write);
}

void write_placed(soft_qp& qp) {
  const std::lock_guard lock(qp.mutex);
  if (qp.state == qp_state::ready) acknowledge(qp);
}

std::optional<recv_wr> placing_recv(soft_qp& qp, std::size_t len) {
  const std::lock_guard lock(qp.mutex);
  if (qp.state != qp_state::ready || qp.srq != nullptr || qp.rq.empty() ||
      qp.rq.front().local.length < len)
    return std::nullopt;
  return qp.rq.front();
}

std::uint8_t* recv_destination(const soft_qp& qp, std::uint32_t lkey, std::uint64_t addr,
                               std::size_t len) {
  mr_table& t = table();
  return within(find(t.by_lkey, lkey), qp.pd, addr, len, access::local_write);
}

void send_placed(soft_qp& qp, std::size_t len, std::optional<std::uint32_t> imm, bool refused) {
  const std::lock_guard lock(qp.mutex);
  if (qp.state != qp_state::ready) return;  // flushed meanwhile, its receive too
  // While the QP is ready, only this link's reader takes receives, and it is
  // here: the receive at the front is still the one placed into.
  if (const auto r = take_recv(qp))
    (void)deliver(qp, *r, len, imm, refused ? wc_status::loc_prot_err : wc_status::success);
}

std::optional<sge> placing_read(soft_qp& qp, std::size_t len) {
  const std::lock_guard lock(qp.mutex);
  if (qp.state != qp_state::ready || !awaits_read(qp, len)) return std::nullopt;
  return qp.sq.front().local;
}

void read_placed(soft_qp& qp, bool refused) {
  const std::lock_guard lock(qp.mutex);
  // Flushed meanwhile, the READ too. While ready, only this link's reader
  // retires the send queue's front, and it is here.
  if (qp.state == qp_state::ready) (void)read_done(qp, !refused);
}

void write_refused(soft_qp& qp) {
  const std::lock_guard lock(qp.mutex);
  if (qp.state == qp_state::ready) (void)refuse(qp, wc_status::rem_access_err);
}

void rnr_exhausted(soft_qp& qp) {
  const std::lock_guard lock(qp.mutex);
  if (qp.state == qp_state::ready) (void)refuse(qp, wc_status::rnr_retry_exc_err);
}

}  // namespace arpma::provider::soft_dp
