#include "core/post.hpp"

#include "arpma/error.hpp"
#include "support/log.hpp"

#include <cstring>
#include <limits>

namespace arpma::detail {
namespace {

std::error_code invalid() { return make_error_code(errc::invalid_argument); }

// One SGE for [offset, offset + len) of `mr`, or none for an empty transfer.
std::error_code local_sge(const local_mr_state* mr, std::size_t offset, std::size_t len,
                          provider::sge& out) {
  if (len > std::numeric_limits<std::uint32_t>::max()) return invalid();
  if (mr == nullptr) {
    if (offset != 0 || len != 0) return invalid();
    out = {};
    return {};
  }
  if (!mr->contains(offset, len)) return invalid();
  out = mr->slice(offset, len);
  return {};
}

std::error_code remote_range(const remote_mr* mr, std::size_t offset, std::size_t len,
                             provider::send_wr& wr) {
  if (mr == nullptr) return offset == 0 && len == 0 ? std::error_code{} : invalid();
  if (offset > mr->size() || len > mr->size() - offset) return invalid();
  wr.remote_addr = mr->addr() + offset;
  wr.rkey = mr->rkey();
  return {};
}

std::error_code post_wr(conn_state& conn, const provider::send_wr& wr, const char* what) {
  if (conn.id == nullptr || !conn.has_qp) return invalid();
  if (auto ec = conn.prov().post_send(conn.id, wr)) {
    ARPMA_LOG_FAILURE(what, ec);
    return ec;
  }
  return {};
}

provider::send_wr base(post_options opts, provider::wr_opcode op) {
  provider::send_wr wr;
  wr.wr_id = opts.wr_id;
  wr.signaled = opts.signaled;
  wr.opcode = op;
  return wr;
}

// librpma's flush emulation (APM) where the device has no flush: an 8-byte
// RDMA read of the flushed region, which the responder executes only after
// every earlier write to it is placed.
std::error_code post_emulated_flush(conn_state& conn, const remote_mr& dst, std::size_t offset,
                                    post_options opts) {
  if (!conn.flush_raw) {
    auto& peer = *conn.peer;
    auto raw = peer.prov.reg_mr(peer.pd, conn.flush_raw_buffer.data(), conn.flush_raw_buffer.size(),
                                provider::access::local_write);
    if (!raw) {
      ARPMA_LOG_FAILURE("register the flush buffer", raw.error());
      return raw.error();
    }
    conn.flush_raw =
        std::make_unique<local_mr_state>(conn.peer, raw.value(), conn.flush_raw_buffer.data(),
                                         conn.flush_raw_buffer.size(), mr_usage::read_dst);
  }
  auto wr = base(opts, provider::wr_opcode::rdma_read);
  const std::size_t len = std::min<std::uint64_t>(8, dst.size() - offset);
  wr.local = conn.flush_raw->slice(0, len);
  wr.remote_addr = dst.addr() + offset;
  wr.rkey = dst.rkey();
  return post_wr(conn, wr, "post flush (emulated by a read)");
}

}  // namespace

std::error_code post_recv(conn_state& conn, const local_mr_state* dst, std::size_t offset,
                          std::size_t len, std::uint64_t wr_id) {
  provider::recv_wr wr;
  wr.wr_id = wr_id;
  if (auto ec = local_sge(dst, offset, len, wr.local)) return ec;
  if (conn.id == nullptr || !conn.has_qp) return invalid();
  if (auto ec = conn.prov().post_recv(conn.id, wr)) {
    ARPMA_LOG_FAILURE("post recv", ec);
    return ec;
  }
  return {};
}

std::error_code post_read(conn_state& conn, const local_mr_state* dst, std::size_t dst_offset,
                          const remote_mr* src, std::size_t src_offset, std::size_t len,
                          post_options opts) {
  if ((dst == nullptr) != (src == nullptr)) return invalid();
  auto wr = base(opts, provider::wr_opcode::rdma_read);
  if (auto ec = local_sge(dst, dst_offset, len, wr.local)) return ec;
  if (auto ec = remote_range(src, src_offset, len, wr)) return ec;
  return post_wr(conn, wr, "post read");
}

std::error_code post_write(conn_state& conn, const remote_mr* dst, std::size_t dst_offset,
                           const local_mr_state* src, std::size_t src_offset, std::size_t len,
                           std::optional<std::uint32_t> imm, post_options opts) {
  if ((dst == nullptr) != (src == nullptr)) return invalid();
  auto wr =
      base(opts, imm ? provider::wr_opcode::rdma_write_with_imm : provider::wr_opcode::rdma_write);
  wr.imm = imm.value_or(0);
  if (auto ec = local_sge(src, src_offset, len, wr.local)) return ec;
  if (auto ec = remote_range(dst, dst_offset, len, wr)) return ec;
  return post_wr(conn, wr, "post write");
}

std::error_code post_atomic_write(conn_state& conn, const remote_mr& dst, std::size_t dst_offset,
                                  const char (&src)[8], post_options opts) {
  if (dst_offset % 8 != 0) return invalid();
  auto wr = base(opts, provider::wr_opcode::atomic_write);
  if (auto ec = remote_range(&dst, dst_offset, 8, wr)) return ec;
  std::memcpy(wr.atomic_value.data(), src, 8);
  return post_wr(conn, wr, "post atomic write");
}

std::error_code post_flush(conn_state& conn, const remote_mr& dst, std::size_t dst_offset,
                           std::size_t len, flush_type type, post_options opts) {
  if (type == flush_type::persistent) {
    if (!conn.direct_write_to_pmem) {
      ARPMA_LOG(log_level::error,
                "Connection does not support flush to persistency. Check if the remote node "
                "supports direct write to persistent memory.");
      return make_error_code(errc::not_supported);
    }
    if ((dst.flush_type() & mr_usage::flush_type_persistent) == 0) {
      ARPMA_LOG(log_level::error,
                "The remote memory region does not support flushing to persistency");
      return make_error_code(errc::not_supported);
    }
  } else if ((dst.flush_type() & mr_usage::flush_type_visibility) == 0) {
    ARPMA_LOG(log_level::error,
              "The remote memory region does not support flushing to global visibility");
    return make_error_code(errc::not_supported);
  }
  if (dst_offset > dst.size() || len > dst.size() - dst_offset) return invalid();
  if (!conn.prov().caps(conn.peer->dev).native_flush)
    return post_emulated_flush(conn, dst, dst_offset, opts);
  auto wr = base(opts, provider::wr_opcode::flush);
  wr.remote_addr = dst.addr() + dst_offset;
  wr.rkey = dst.rkey();
  wr.flush_length = len;
  wr.flush = type == flush_type::persistent ? provider::flush_type::persistent
                                            : provider::flush_type::global;
  wr.level = provider::flush_level::range;
  return post_wr(conn, wr, "post flush");
}

std::error_code post_send(conn_state& conn, const local_mr_state* src, std::size_t offset,
                          std::size_t len, std::optional<std::uint32_t> imm, post_options opts) {
  auto wr = base(opts, imm ? provider::wr_opcode::send_with_imm : provider::wr_opcode::send);
  wr.imm = imm.value_or(0);
  if (auto ec = local_sge(src, offset, len, wr.local)) return ec;
  return post_wr(conn, wr, "post send");
}

void set_direct_write_to_pmem(conn_state& conn, bool direct) noexcept {
  conn.direct_write_to_pmem.store(direct);
}

}  // namespace arpma::detail
