// arpma::completion: what a finished data-path operation reports.
#pragma once

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

/// What a finished data-path operation reports.
struct completion {
  std::uint32_t byte_len = 0;  ///< bytes received (receives) or moved
  wc_opcode opcode = wc_opcode::send;
  std::optional<std::uint32_t> imm;  ///< immediate data (host order), if any
  std::uint32_t qp_num = 0;
};

}  // namespace arpma
