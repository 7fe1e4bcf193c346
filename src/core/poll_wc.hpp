// Polling a CQ into librpma's `struct ibv_wc` (rpma_cq_get_wc, arpma::cq::poll).
#pragma once

#include "arpma/result.hpp"
#include "provider/provider.hpp"

#include <infiniband/verbs.h>

#include <cstddef>
#include <span>

namespace arpma::detail {

/// Up to out.size() completions of `cq`, as ibv_wc (imm_data in network
/// order, IBV_WC_WITH_IMM set); how many.
result<std::size_t> poll_into(provider::provider& p, provider::cq* cq, std::span<ibv_wc> out);

}  // namespace arpma::detail
