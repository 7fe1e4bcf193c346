// Waiting for a completion through the C API, as a librpma program does in fd mode.
#pragma once

#include <librpma.h>

#include <gtest/gtest.h>

namespace arpma::test {

/// One completion of `cq`, blocking in rpma_cq_wait() between tries; a test failure (and a
/// zeroed wc) when none comes in 1000 wake-ups.
inline ibv_wc next_wc(rpma_cq* cq) {
  ibv_wc wc{};
  for (int tries = 0; tries < 1000; ++tries) {
    int got = 0;
    const int rc = rpma_cq_get_wc(cq, 1, &wc, &got);
    if (rc == 0) return wc;
    EXPECT_EQ(rc, RPMA_E_NO_COMPLETION);
    EXPECT_EQ(rpma_cq_wait(cq), 0);
  }
  ADD_FAILURE() << "no completion";
  return wc;
}

}  // namespace arpma::test
