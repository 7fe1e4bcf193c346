#include "core/post.hpp"

#include "arpma/error.hpp"
#include "core/log_internal.hpp"

#include <limits>

namespace arpma::detail {
namespace {

// One SGE for [offset, offset + len) of `mr`, or none for an empty transfer.
std::error_code local_sge(const local_mr_state* mr, std::size_t offset, std::size_t len,
                          provider::sge& out) {
  if (len > std::numeric_limits<std::uint32_t>::max())
    return make_error_code(errc::invalid_argument);
  if (mr == nullptr) {
    if (offset != 0 || len != 0) return make_error_code(errc::invalid_argument);
    out = {};
    return {};
  }
  if (!mr->contains(offset, len)) return make_error_code(errc::invalid_argument);
  out = mr->slice(offset, len);
  return {};
}

}  // namespace

std::error_code post_recv(conn_state& conn, const local_mr_state* dst, std::size_t offset,
                          std::size_t len, std::uint64_t wr_id) {
  provider::recv_wr wr;
  wr.wr_id = wr_id;
  if (auto ec = local_sge(dst, offset, len, wr.local)) return ec;
  if (auto ec = conn.prov().post_recv(conn.id, wr)) {
    ARPMA_LOG_FAILURE("post recv", ec);
    return ec;
  }
  return {};
}

}  // namespace arpma::detail
