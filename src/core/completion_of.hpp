// A provider's work completion as the C++ API reports it (cq::poll, async_*).
#pragma once

#include "arpma/completion.hpp"
#include "arpma/error.hpp"
#include "arpma/result.hpp"
#include "provider/provider.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>

namespace arpma::detail {

/// A failed completion's status as a wc_errc error_code.
[[nodiscard]] inline std::error_code status_error(provider::wc_status status) noexcept {
  return make_error_code(static_cast<wc_errc>(static_cast<int>(status)));
}

/// Every field of `wc`; wr_id only when `with_wr_id` (an async_* operation's
/// wr_id is arpma's own pointer, not the caller's business).
[[nodiscard]] inline completion completion_of(const provider::work_completion& wc,
                                              bool with_wr_id) noexcept {
  completion out;
  out.byte_len = wc.byte_len;
  out.opcode = static_cast<wc_opcode>(static_cast<int>(wc.opcode));
  if (wc.with_imm) out.imm = wc.imm_data;
  out.qp_num = wc.qp_num;
  if (with_wr_id) out.wr_id = wc.wr_id;
  if (wc.status != provider::wc_status::success) {
    out.status = status_error(wc.status);
    out.vendor_err = wc.vendor_err;
  }
  return out;
}

template <std::size_t Batch, class Out, class Convert>
result<std::size_t> poll_batches(provider::provider& p, provider::cq* cq, std::span<Out> out,
                                 Convert convert) {
  std::array<provider::work_completion, Batch> batch;
  std::size_t got = 0;
  while (got < out.size()) {
    const auto want = std::min(batch.size(), out.size() - got);
    auto polled = p.poll_cq(cq, std::span(batch.data(), want));
    if (!polled) return polled.error();
    for (std::size_t i = 0; i < polled.value(); ++i) convert(batch[i], out[got++]);
    if (polled.value() < want) break;
  }
  return got;
}

/// Up to out.size() completions of `cq`, each converted by `convert`
/// (work_completion, Out&) in place; how many. In place, not returned: a
/// struct built on the stack and copied out stalls store forwarding (perf:
/// two thirds of rpma_cq_get_wc's samples).
template <class Out, class Convert>
result<std::size_t> poll_converted(provider::provider& p, provider::cq* cq, std::span<Out> out,
                                   Convert convert) {
  // The usual call (rpma_cq_get_wc with 1) gets a batch of one: sixteen
  // entries to initialise per poll cost a few percent of a 64 B write's round
  // trip in the Soft-RoCE guest.
  if (out.size() == 1) return poll_batches<1>(p, cq, out, convert);
  return poll_batches<16>(p, cq, out, convert);
}

}  // namespace arpma::detail
