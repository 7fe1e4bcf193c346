// arpma::completion: what a finished data-path operation reports.
#pragma once

#include "arpma/error.hpp"

#include <cstdint>
#include <optional>

namespace arpma {

/// The opcode of a completion: the values of `ibv_wc_opcode`.
enum class wc_opcode : int {
  send = 0,
  rdma_write = 1,
  rdma_read = 2,
  flush = 8,
  atomic_write = 9,
  recv = 128,
  recv_rdma_with_imm = 129,
};

/// What a finished data-path operation reports: arpma's own form of a work
/// completion, so that no C++ user needs rdma-core's headers (librpma.h keeps
/// `struct ibv_wc` for the C API).
struct completion {
  std::uint32_t byte_len = 0;  ///< bytes received (receives) or moved
  wc_opcode opcode = wc_opcode::send;
  std::optional<std::uint32_t> imm;  ///< immediate data (host order), if any
  std::uint32_t qp_num = 0;
  /// The work request's id: the wr_id given to connection::post_* (cq::poll).
  /// An async_* operation identifies its own work requests; there it is 0.
  std::uint64_t wr_id = 0;
  /// Empty on success, else a wc_errc (the `ibv_wc_status` values).
  error_code status;
  std::uint32_t vendor_err = 0;  ///< the device's own error code, if it failed
};

}  // namespace arpma
