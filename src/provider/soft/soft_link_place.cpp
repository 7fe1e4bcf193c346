// Placing a large frame's payload as it arrives (soft_link_place.hpp): where
// it goes, the reads that put it there, and what completes once it is in.
#include "provider/soft/soft_link_place.hpp"

#include "provider/soft/soft_memory.hpp"
#include "provider/soft/soft_traffic.hpp"

#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <memory>
#include <optional>
#include <shared_mutex>

namespace arpma::provider::soft_link {

using namespace soft_wire;  // NOLINT(google-build-using-namespace): the frame vocabulary

namespace {

/// WRITEs, SENDs and READ responses this large have their payload read
/// straight into the target MR, the receive's or the READ's buffer when it is
/// not all in the socket already: one copy (the kernel's), as a NIC's.
constexpr std::size_t direct_min = std::size_t{16} << 10;
using place_kind = soft_id::frame_in_place::kind;

/// A placed payload's last read takes this much more into the emptied buffer,
/// so that the next frame's header (an ACK, a credit, the next large frame's
/// head) costs no read of its own.
constexpr std::size_t placed_tail = 256;

}  // namespace

std::size_t fixed_part(frame_type type) noexcept {
  return type == frame_type::write ? remote_size : type == frame_type::send_imm ? 4 : 0;
}

bool placeable(const frame_header& h) noexcept {
  return h.length >= direct_min &&
         (h.type == frame_type::write || h.type == frame_type::send ||
          h.type == frame_type::send_imm || h.type == frame_type::read_resp);
}

std::size_t socket_holds(soft_id& id) {
  const std::lock_guard lock(id.fd_mutex);
  int n = 0;
  return id.tx_fd >= 0 && ::ioctl(id.tx_fd, FIONREAD, &n) == 0 && n > 0
             ? static_cast<std::size_t>(n)
             : 0;
}

namespace {

/// The QP a large frame's payload may be placed for now, or nullptr.
std::shared_ptr<soft_qp> placing_qp(const id_ptr& id) {
  std::shared_ptr<soft_qp> qp;
  {
    const std::lock_guard lock(id->mutex);
    if (id->state != conn_state::established || !id->qp) return nullptr;
    qp = id->qp;
  }
  return soft_dp::executes_requests(*qp) ? qp : nullptr;
}

/// Where the next `len` bytes of the placed payload go, or nullptr; with the
/// memory lock held.
std::uint8_t* destination(const soft_qp& qp, const soft_id::frame_in_place& p, std::size_t len) {
  return p.what == place_kind::write ? soft_dp::write_destination(qp, p.key, p.addr, len)
                                     : soft_dp::recv_destination(qp, p.key, p.addr, len);
}

/// Where a large frame's payload goes: the WRITE's target, the receive a
/// SEND completes (the front of the QP's own queue: a SEND that would find
/// none, or one too small, goes the ordinary way), the buffer of the READ a
/// response answers (one that answers none goes the ordinary way, to be
/// refused there).
std::optional<soft_id::frame_in_place> placement(soft_qp& qp, const frame_header& h,
                                                 const std::uint8_t* fixed) {
  soft_id::frame_in_place p;
  p.left = h.length - fixed_part(h.type);
  if (h.type == frame_type::write) {
    p.key = get_u32(fixed);
    p.addr = get_u64(fixed + 4);
    return p;
  }
  if (h.type == frame_type::read_resp) {
    const auto local = soft_dp::placing_read(qp, p.left);
    if (!local) return std::nullopt;
    p.key = local->lkey;
    p.addr = local->addr;
    p.what = place_kind::read_response;
    return p;
  }
  const auto r = soft_dp::placing_recv(qp, p.left);
  if (!r) return std::nullopt;
  p.key = r->local.lkey;
  p.addr = r->local.addr;
  p.what = place_kind::send;
  p.length = p.left;
  if (h.type == frame_type::send_imm) p.imm = get_u32(fixed);
  return p;
}

/// The whole payload is in: the WRITE is acknowledged (or refused), the
/// SEND's receive completes, the READ completes.
void placed(const id_ptr& id, const std::shared_ptr<soft_qp>& qp) {
  auto& p = id->placing;
  ++id->rx_frames;
  id->rx_large_frames = true;  // the next frame's header and target are read alone
  // This piece's QP, unless the frame was refused before it (then looked up
  // once more, to answer with the NAK).
  const auto target = qp ? qp : placing_qp(id);
  if (!target) {
    p = {};
    return;
  }
  switch (p.what) {
    case place_kind::send:
      // Marked before the receive completes, as for any message (handle_inline).
      id->ack_awaits_answer.store(true);
      soft_dp::send_placed(*target, p.length, p.imm, p.refused);
      id->answer_due = true;
      break;
    case place_kind::read_response: soft_dp::read_placed(*target, p.refused); break;
    case place_kind::write:
      if (p.refused) soft_dp::write_refused(*target);
      if (!p.refused) soft_dp::write_placed(*target);
      break;
  }
  p = {};
}

}  // namespace

/// A large frame whose header and fixed part are buffered (nothing after
/// them but payload): its payload goes to memory as it arrives (place_more),
/// never through a buffer the size of the frame. False when it is not
/// eligible (the ordinary path then buffers it, and refuses it if it must).
bool start_placing(const id_ptr& id, const frame_header& h) {
  const std::uint8_t* fixed = id->rx.data() + id->rx_begin + header_size;
  const std::size_t buffered = id->rx_end - id->rx_begin - header_size - fixed_part(h.type);
  // Requests wait behind a SEND held for a receive (RNR); responses do not.
  if (h.type != frame_type::read_resp && !id->stalled.empty()) return false;
  const auto qp = placing_qp(id);
  if (!qp) return false;
  auto p = placement(*qp, h, fixed);
  if (!p) return false;
  {
    auto memory = soft_dp::lock_memory();
    std::uint8_t* dst = destination(*qp, *p, p->left);
    // A target the application unmapped: the buffered path refuses it (NAK).
    if (dst == nullptr || !soft_mem::copy_to_region(dst, fixed + fixed_part(h.type), buffered))
      return false;
  }
  p->addr += buffered;
  p->left -= buffered;
  id->placing = *p;
  id->rx_begin = id->rx_end = 0;
  id->rx_data_seen = true;  // data flows: the buffer's floor is rx_large from now on
  return true;
}

/// Reads what the socket holds of the placed payload. The destination is
/// looked up again for each piece, under the memory lock (the application
/// may deregister it meanwhile; then the rest is read and dropped, and the
/// frame refused once it has all arrived).
fill_result place_more(const id_ptr& id) {
  auto& p = id->placing;
  const auto qp = p.refused ? nullptr : placing_qp(id);
  ssize_t n = 0;
  int err = 0;
  std::size_t want = 0;
  {
    std::shared_lock<std::shared_mutex> memory;
    std::uint8_t* dst = nullptr;
    if (qp) {
      memory = soft_dp::lock_memory();
      dst = destination(*qp, p, p.left);
    }
    p.refused = p.refused || dst == nullptr;
    // The buffer is empty while a payload is placed (start_placing).
    std::array<iovec, 2> iov{iovec{dst, p.left},
                             iovec{id->rx.data(), std::min(placed_tail, id->rx.size())}};
    if (p.refused) iov = {iovec{id->rx.data(), std::min(p.left, id->rx.size())}, iovec{}};
    want = iov[0].iov_len + iov[1].iov_len;
    msghdr msg{};
    msg.msg_iov = iov.data();
    msg.msg_iovlen = iov[1].iov_len > 0 ? 2 : 1;
    const std::lock_guard lock(id->fd_mutex);
    if (id->tx_fd < 0) return fill_result::would_block;
    n = ::recvmsg(id->tx_fd, &msg, MSG_DONTWAIT);
    err = errno;
  }
  if (n > 0) soft_traffic::note();
  if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR))
    return fill_result::would_block;
  if (n < 0 && err == EFAULT && !p.refused) {
    p.refused = true;  // unmapped under us; the kernel consumed nothing it could not copy
    return fill_result::data;
  }
  if (n <= 0) {
    id->rx_error = n == 0 ? ECONNRESET : err;
    return fill_result::failed;
  }
  id->rx_short = static_cast<std::size_t>(n) < want;
  const std::size_t payload = std::min(static_cast<std::size_t>(n), p.left);
  id->rx_end = static_cast<std::size_t>(n) - payload;  // the next frame's first bytes
  p.addr += payload;
  p.left -= payload;
  if (p.left == 0) placed(id, qp);
  return fill_result::data;
}

}  // namespace arpma::provider::soft_link
