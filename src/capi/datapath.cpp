// rpma_read / write / atomic_write / flush / send / recv: librpma's checks,
// then one work request on the connection's queue pair.
#include <librpma.h>

#include "capi/objects.hpp"
#include "core/conn_state.hpp"
#include "core/post.hpp"

#include <cstdint>
#include <optional>

namespace {

using arpma::detail::post_options;

// librpma: a completion on success only with RPMA_F_COMPLETION_ALWAYS's own bit.
constexpr int completion_on_success = RPMA_F_COMPLETION_ALWAYS & ~RPMA_F_COMPLETION_ON_ERROR;

post_options options(int flags, const void* op_context) {
  return {(flags & completion_on_success) != 0, reinterpret_cast<std::uintptr_t>(op_context)};
}

arpma::detail::conn_state* state_of(rpma_conn* conn) {
  return conn != nullptr ? arpma::detail::access::state(conn->cxx) : nullptr;
}

const arpma::detail::local_mr_state* local(const rpma_mr_local* mr) {
  return mr != nullptr ? arpma::detail::access::state(mr->cxx) : nullptr;
}

const arpma::remote_mr* remote(const rpma_mr_remote* mr) {
  return mr != nullptr ? &mr->cxx : nullptr;
}

int result(const std::error_code& ec) { return arpma::to_rpma_error(ec); }

// Both buffers, or neither and nothing to move (a zero-length operation).
bool pair_ok(const void* a, const void* b, std::size_t off_a, std::size_t off_b, std::size_t len) {
  return (a != nullptr && b != nullptr) ||
         (a == nullptr && b == nullptr && off_a == 0 && off_b == 0 && len == 0);
}

}  // namespace

extern "C" {

int rpma_read(struct rpma_conn* conn, struct rpma_mr_local* dst, size_t dst_offset,
              const struct rpma_mr_remote* src, size_t src_offset, size_t len, int flags,
              const void* op_context) {
  auto* state = state_of(conn);
  if (state == nullptr || flags == 0 || !pair_ok(dst, src, dst_offset, src_offset, len))
    return RPMA_E_INVAL;
  return result(arpma::detail::post_read(*state, local(dst), dst_offset, remote(src), src_offset,
                                         len, options(flags, op_context)));
}

int rpma_write(struct rpma_conn* conn, struct rpma_mr_remote* dst, size_t dst_offset,
               const struct rpma_mr_local* src, size_t src_offset, size_t len, int flags,
               const void* op_context) {
  auto* state = state_of(conn);
  if (state == nullptr || flags == 0 || !pair_ok(dst, src, dst_offset, src_offset, len))
    return RPMA_E_INVAL;
  return result(arpma::detail::post_write(*state, remote(dst), dst_offset, local(src), src_offset,
                                          len, std::nullopt, options(flags, op_context)));
}

int rpma_write_with_imm(struct rpma_conn* conn, struct rpma_mr_remote* dst, size_t dst_offset,
                        const struct rpma_mr_local* src, size_t src_offset, size_t len, int flags,
                        uint32_t imm, const void* op_context) {
  auto* state = state_of(conn);
  if (state == nullptr || flags == 0 || !pair_ok(dst, src, dst_offset, src_offset, len))
    return RPMA_E_INVAL;
  return result(arpma::detail::post_write(*state, remote(dst), dst_offset, local(src), src_offset,
                                          len, imm, options(flags, op_context)));
}

int rpma_atomic_write(struct rpma_conn* conn, struct rpma_mr_remote* dst, size_t dst_offset,
                      const char src[8], int flags, const void* op_context) {
  auto* state = state_of(conn);
  if (state == nullptr || dst == nullptr || src == nullptr || flags == 0) return RPMA_E_INVAL;
  if (dst_offset % RPMA_ATOMIC_WRITE_ALIGNMENT != 0) return RPMA_E_INVAL;
  char value[8];
  std::copy(src, src + 8, value);
  return result(arpma::detail::post_atomic_write(*state, dst->cxx, dst_offset, value,
                                                 options(flags, op_context)));
}

int rpma_flush(struct rpma_conn* conn, struct rpma_mr_remote* dst, size_t dst_offset, size_t len,
               enum rpma_flush_type type, int flags, const void* op_context) {
  auto* state = state_of(conn);
  if (state == nullptr || dst == nullptr || flags == 0) return RPMA_E_INVAL;
  if (type != RPMA_FLUSH_TYPE_PERSISTENT && type != RPMA_FLUSH_TYPE_VISIBILITY) return RPMA_E_INVAL;
  static_assert(static_cast<int>(arpma::flush_type::persistent) == RPMA_FLUSH_TYPE_PERSISTENT &&
                static_cast<int>(arpma::flush_type::visibility) == RPMA_FLUSH_TYPE_VISIBILITY);
  const auto kind = static_cast<arpma::flush_type>(type);
  return arpma::capi::guarded([&] {
    return result(arpma::detail::post_flush(*state, dst->cxx, dst_offset, len, kind,
                                            options(flags, op_context)));
  });
}

int rpma_send(struct rpma_conn* conn, const struct rpma_mr_local* src, size_t offset, size_t len,
              int flags, const void* op_context) {
  auto* state = state_of(conn);
  if (state == nullptr || flags == 0 || (src == nullptr && (offset != 0 || len != 0)))
    return RPMA_E_INVAL;
  return result(arpma::detail::post_send(*state, local(src), offset, len, std::nullopt,
                                         options(flags, op_context)));
}

int rpma_send_with_imm(struct rpma_conn* conn, const struct rpma_mr_local* src, size_t offset,
                       size_t len, int flags, uint32_t imm, const void* op_context) {
  auto* state = state_of(conn);
  if (state == nullptr || flags == 0 || (src == nullptr && (offset != 0 || len != 0)))
    return RPMA_E_INVAL;
  return result(
      arpma::detail::post_send(*state, local(src), offset, len, imm, options(flags, op_context)));
}

int rpma_recv(struct rpma_conn* conn, struct rpma_mr_local* dst, size_t offset, size_t len,
              const void* op_context) {
  auto* state = state_of(conn);
  if (state == nullptr || (dst == nullptr && (offset != 0 || len != 0))) return RPMA_E_INVAL;
  return result(arpma::detail::post_recv(*state, local(dst), offset, len,
                                         reinterpret_cast<std::uintptr_t>(op_context)));
}

int rpma_conn_apply_remote_peer_cfg(struct rpma_conn* conn, const struct rpma_peer_cfg* pcfg) {
  auto* state = state_of(conn);
  if (state == nullptr || pcfg == nullptr) return RPMA_E_INVAL;
  arpma::detail::set_direct_write_to_pmem(*state, pcfg->direct_write_to_pmem.load());
  return 0;
}

}  // extern "C"
