// Posting work requests on a connection's (or request's) queue pair: the
// argument checks and the work request, shared by the C and C++ data paths.
#pragma once

#include "arpma/connection.hpp"
#include "arpma/mr.hpp"
#include "core/conn_state.hpp"
#include "core/mr_state.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <system_error>

namespace arpma::detail {

/// What every post takes besides its buffers.
struct post_options {
  bool signaled = true;  ///< a completion also on success
  std::uint64_t wr_id = 0;
};

// Ranges are checked against both regions (overflow-safe): one leaving its
// region is errc::invalid_argument here, not a remote access error later.
// A null local region with length 0 is an empty transfer, as in librpma.

std::error_code post_recv(conn_state& conn, const local_mr_state* dst, std::size_t offset,
                          std::size_t len, std::uint64_t wr_id);
std::error_code post_read(conn_state& conn, const local_mr_state* dst, std::size_t dst_offset,
                          const remote_mr* src, std::size_t src_offset, std::size_t len,
                          post_options opts);
std::error_code post_write(conn_state& conn, const remote_mr* dst, std::size_t dst_offset,
                           const local_mr_state* src, std::size_t src_offset, std::size_t len,
                           std::optional<std::uint32_t> imm, post_options opts);
/// 8 bytes to an 8-byte aligned offset (errc::invalid_argument otherwise).
std::error_code post_atomic_write(conn_state& conn, const remote_mr& dst, std::size_t dst_offset,
                                  const char (&src)[8], post_options opts);
/// errc::not_supported when the region (or, for persistent, the peer's
/// configuration) does not allow that flush, as librpma.
std::error_code post_flush(conn_state& conn, const remote_mr& dst, std::size_t dst_offset,
                           std::size_t len, flush_type type, post_options opts);
std::error_code post_send(conn_state& conn, const local_mr_state* src, std::size_t offset,
                          std::size_t len, std::optional<std::uint32_t> imm, post_options opts);

/// rpma_conn_apply_remote_peer_cfg: whether the peer places writes directly
/// in persistent memory (what a persistent flush needs).
void set_direct_write_to_pmem(conn_state& conn, bool direct) noexcept;

/// The work request of `op` (any kind), posted with `wr_id` (data_ops.cpp).
std::error_code post_data_op(conn_state& st, const data_op& op, std::uint64_t wr_id, bool signaled);

}  // namespace arpma::detail
