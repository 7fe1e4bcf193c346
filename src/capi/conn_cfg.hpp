// struct rpma_conn_cfg: the C handle of a connection configuration.
//
// As in librpma 1.3 (built with ATOMIC_OPERATIONS_SUPPORTED) every field is an
// atomic, so one object may be read and written from several threads at once.
#pragma once

#include "arpma/conn_cfg.hpp"

#include <atomic>
#include <cstdint>

struct rpma_srq;

struct rpma_conn_cfg {
  std::atomic<int> timeout_ms{static_cast<int>(arpma::conn_cfg::default_timeout.count())};
  std::atomic<std::uint32_t> cq_size{arpma::conn_cfg{}.cq_size};
  std::atomic<std::uint32_t> rcq_size{arpma::conn_cfg{}.rcq_size};
  std::atomic<std::uint32_t> sq_size{arpma::conn_cfg{}.sq_size};
  std::atomic<std::uint32_t> rq_size{arpma::conn_cfg{}.rq_size};
  std::atomic<bool> shared_comp_channel{arpma::conn_cfg{}.shared_completion_channel};
  std::atomic<rpma_srq*> srq{nullptr};
};

namespace arpma::capi {

/// The C++ value of `cfg`; nullptr gives the defaults (librpma's static
/// default cfg). Each field is loaded once; the SRQ is pointed at (the
/// connections made then share its ownership).
[[nodiscard]] conn_cfg to_conn_cfg(const rpma_conn_cfg* cfg) noexcept;

/// The SRQ attached to `cfg`; nullptr for a nullptr cfg or when none is set.
[[nodiscard]] rpma_srq* srq_of(const rpma_conn_cfg* cfg) noexcept;

}  // namespace arpma::capi
