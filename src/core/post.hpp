// Posting work requests on a connection's (or request's) queue pair: the
// argument checks and the work request, shared by the C and C++ data paths.
#pragma once

#include "core/conn_state.hpp"
#include "core/mr_state.hpp"

#include <cstddef>
#include <cstdint>
#include <system_error>

namespace arpma::detail {

/// A receive into [offset, offset + len) of `dst` (null with len 0: a
/// receive without a buffer, for messages without payload).
/// errc::invalid_argument when the range leaves the region or is over 4 GiB.
std::error_code post_recv(conn_state& conn, const local_mr_state* dst, std::size_t offset,
                          std::size_t len, std::uint64_t wr_id);

}  // namespace arpma::detail
