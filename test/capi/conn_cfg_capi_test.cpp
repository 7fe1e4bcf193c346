// rpma_conn_cfg_*: librpma 1.3's src/conn_cfg.c behaviour, and the
// conversion the C wrappers hand to the C++ core.
#include <librpma.h>

#include "capi/conn_cfg.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <thread>
#include <vector>

namespace conn_cfg_capi_test {

namespace {

using namespace std::chrono_literals;

// SRQ objects do not exist yet: any non-NULL address will do, the cfg only stores it.
rpma_srq* dummy_srq(int n = 0) {
  static char storage[4];
  return reinterpret_cast<rpma_srq*>(&storage[n]);
}

class ConnCfg : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(rpma_conn_cfg_new(&cfg_), 0); }
  void TearDown() override {
    EXPECT_EQ(rpma_conn_cfg_delete(&cfg_), 0);
    EXPECT_EQ(cfg_, nullptr);
  }
  rpma_conn_cfg* cfg_ = nullptr;
};

TEST(ConnCfgNew, NullPtrIsInvalid) { EXPECT_EQ(rpma_conn_cfg_new(nullptr), RPMA_E_INVAL); }

TEST(ConnCfgNew, WritesTheOutParameter) {
  rpma_conn_cfg* cfg = nullptr;
  ASSERT_EQ(rpma_conn_cfg_new(&cfg), 0);
  EXPECT_NE(cfg, nullptr);
  EXPECT_EQ(rpma_conn_cfg_delete(&cfg), 0);
  EXPECT_EQ(cfg, nullptr);
}

TEST(ConnCfgNew, EachCallMakesADistinctObject) {
  rpma_conn_cfg* a = nullptr;
  rpma_conn_cfg* b = nullptr;
  ASSERT_EQ(rpma_conn_cfg_new(&a), 0);
  ASSERT_EQ(rpma_conn_cfg_new(&b), 0);
  EXPECT_NE(a, b);
  ASSERT_EQ(rpma_conn_cfg_set_cq_size(a, 99), 0);
  uint32_t size = 0;
  ASSERT_EQ(rpma_conn_cfg_get_cq_size(b, &size), 0);
  EXPECT_EQ(size, 10u);
  EXPECT_EQ(rpma_conn_cfg_delete(&a), 0);
  EXPECT_EQ(rpma_conn_cfg_delete(&b), 0);
}

TEST(ConnCfgDelete, NullPtrIsInvalid) { EXPECT_EQ(rpma_conn_cfg_delete(nullptr), RPMA_E_INVAL); }

TEST(ConnCfgDelete, NullObjectIsSuccess) {
  rpma_conn_cfg* cfg = nullptr;
  EXPECT_EQ(rpma_conn_cfg_delete(&cfg), 0);
  EXPECT_EQ(cfg, nullptr);
}

TEST_F(ConnCfg, Defaults) {
  int timeout = -1;
  uint32_t cq = 0, rcq = 1, sq = 0, rq = 0;
  bool shared = true;
  rpma_srq* srq = dummy_srq();
  EXPECT_EQ(rpma_conn_cfg_get_timeout(cfg_, &timeout), 0);
  EXPECT_EQ(timeout, RPMA_DEFAULT_TIMEOUT_MS);
  EXPECT_EQ(timeout, 1000);
  EXPECT_EQ(rpma_conn_cfg_get_cq_size(cfg_, &cq), 0);
  EXPECT_EQ(cq, 10u);
  EXPECT_EQ(rpma_conn_cfg_get_rcq_size(cfg_, &rcq), 0);
  EXPECT_EQ(rcq, 0u);
  EXPECT_EQ(rpma_conn_cfg_get_sq_size(cfg_, &sq), 0);
  EXPECT_EQ(sq, 10u);
  EXPECT_EQ(rpma_conn_cfg_get_rq_size(cfg_, &rq), 0);
  EXPECT_EQ(rq, 10u);
  EXPECT_EQ(rpma_conn_cfg_get_compl_channel(cfg_, &shared), 0);
  EXPECT_FALSE(shared);
  EXPECT_EQ(rpma_conn_cfg_get_srq(cfg_, &srq), 0);
  EXPECT_EQ(srq, nullptr);
}

TEST_F(ConnCfg, DefaultsMatchTheCxxValue) {
  EXPECT_EQ(arpma::capi::to_conn_cfg(cfg_), arpma::conn_cfg{});
}

TEST_F(ConnCfg, TimeoutRoundTrip) {
  for (const int value : {0, 1, 1000, 12345, INT_MAX}) {
    ASSERT_EQ(rpma_conn_cfg_set_timeout(cfg_, value), 0) << value;
    int got = -1;
    ASSERT_EQ(rpma_conn_cfg_get_timeout(cfg_, &got), 0);
    EXPECT_EQ(got, value);
  }
}

TEST_F(ConnCfg, NegativeTimeoutIsInvalidAndKeepsTheValue) {
  ASSERT_EQ(rpma_conn_cfg_set_timeout(cfg_, 500), 0);
  EXPECT_EQ(rpma_conn_cfg_set_timeout(cfg_, -1), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_set_timeout(cfg_, INT_MIN), RPMA_E_INVAL);
  int got = -1;
  ASSERT_EQ(rpma_conn_cfg_get_timeout(cfg_, &got), 0);
  EXPECT_EQ(got, 500);
}

TEST_F(ConnCfg, QueueSizesRoundTrip) {
  using setter = int (*)(rpma_conn_cfg*, uint32_t);
  using getter = int (*)(const rpma_conn_cfg*, uint32_t*);
  const struct {
    setter set;
    getter get;
    const char* name;
  } fields[] = {
      {rpma_conn_cfg_set_cq_size, rpma_conn_cfg_get_cq_size, "cq"},
      {rpma_conn_cfg_set_rcq_size, rpma_conn_cfg_get_rcq_size, "rcq"},
      {rpma_conn_cfg_set_sq_size, rpma_conn_cfg_get_sq_size, "sq"},
      {rpma_conn_cfg_set_rq_size, rpma_conn_cfg_get_rq_size, "rq"},
  };
  for (const auto& f : fields) {
    for (const uint32_t value : {0u, 1u, 10u, 4096u, UINT32_MAX}) {
      ASSERT_EQ(f.set(cfg_, value), 0) << f.name;
      uint32_t got = 7;
      ASSERT_EQ(f.get(cfg_, &got), 0) << f.name;
      EXPECT_EQ(got, value) << f.name;
    }
  }
}

TEST_F(ConnCfg, FieldsAreIndependent) {
  ASSERT_EQ(rpma_conn_cfg_set_cq_size(cfg_, 1), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg_, 2), 0);
  ASSERT_EQ(rpma_conn_cfg_set_sq_size(cfg_, 3), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rq_size(cfg_, 4), 0);
  uint32_t cq = 0, rcq = 0, sq = 0, rq = 0;
  ASSERT_EQ(rpma_conn_cfg_get_cq_size(cfg_, &cq), 0);
  ASSERT_EQ(rpma_conn_cfg_get_rcq_size(cfg_, &rcq), 0);
  ASSERT_EQ(rpma_conn_cfg_get_sq_size(cfg_, &sq), 0);
  ASSERT_EQ(rpma_conn_cfg_get_rq_size(cfg_, &rq), 0);
  EXPECT_EQ(cq, 1u);
  EXPECT_EQ(rcq, 2u);
  EXPECT_EQ(sq, 3u);
  EXPECT_EQ(rq, 4u);
}

TEST_F(ConnCfg, ComplChannelRoundTrip) {
  bool shared = false;
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg_, true), 0);
  ASSERT_EQ(rpma_conn_cfg_get_compl_channel(cfg_, &shared), 0);
  EXPECT_TRUE(shared);
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg_, false), 0);
  ASSERT_EQ(rpma_conn_cfg_get_compl_channel(cfg_, &shared), 0);
  EXPECT_FALSE(shared);
}

TEST_F(ConnCfg, SrqRoundTrip) {
  rpma_srq* got = nullptr;
  ASSERT_EQ(rpma_conn_cfg_set_srq(cfg_, dummy_srq(1)), 0);
  ASSERT_EQ(rpma_conn_cfg_get_srq(cfg_, &got), 0);
  EXPECT_EQ(got, dummy_srq(1));
  ASSERT_EQ(rpma_conn_cfg_set_srq(cfg_, dummy_srq(2)), 0);
  ASSERT_EQ(rpma_conn_cfg_get_srq(cfg_, &got), 0);
  EXPECT_EQ(got, dummy_srq(2));
}

// librpma's code rejects a NULL SRQ (its manual mentions only cfg), so an SRQ
// once set cannot be removed from a cfg.
TEST_F(ConnCfg, NullSrqIsInvalidAndKeepsTheValue) {
  ASSERT_EQ(rpma_conn_cfg_set_srq(cfg_, dummy_srq(1)), 0);
  EXPECT_EQ(rpma_conn_cfg_set_srq(cfg_, nullptr), RPMA_E_INVAL);
  rpma_srq* got = nullptr;
  ASSERT_EQ(rpma_conn_cfg_get_srq(cfg_, &got), 0);
  EXPECT_EQ(got, dummy_srq(1));
}

TEST(ConnCfgArgs, NullCfgIsInvalidForEverySetter) {
  EXPECT_EQ(rpma_conn_cfg_set_timeout(nullptr, 1), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_set_cq_size(nullptr, 1), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_set_rcq_size(nullptr, 1), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_set_sq_size(nullptr, 1), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_set_rq_size(nullptr, 1), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_set_compl_channel(nullptr, true), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_set_srq(nullptr, dummy_srq()), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_set_srq(nullptr, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_set_timeout(nullptr, -1), RPMA_E_INVAL);
}

TEST(ConnCfgArgs, NullCfgIsInvalidForEveryGetterAndLeavesTheOutput) {
  int timeout = 77;
  uint32_t size = 77;
  bool shared = true;
  rpma_srq* srq = dummy_srq(3);
  EXPECT_EQ(rpma_conn_cfg_get_timeout(nullptr, &timeout), RPMA_E_INVAL);
  EXPECT_EQ(timeout, 77);
  EXPECT_EQ(rpma_conn_cfg_get_cq_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_get_rcq_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_get_sq_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_get_rq_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_EQ(size, 77u);
  EXPECT_EQ(rpma_conn_cfg_get_compl_channel(nullptr, &shared), RPMA_E_INVAL);
  EXPECT_TRUE(shared);
  EXPECT_EQ(rpma_conn_cfg_get_srq(nullptr, &srq), RPMA_E_INVAL);
  EXPECT_EQ(srq, dummy_srq(3));
}

TEST_F(ConnCfg, NullOutputIsInvalidForEveryGetter) {
  EXPECT_EQ(rpma_conn_cfg_get_timeout(cfg_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_get_cq_size(cfg_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_get_rcq_size(cfg_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_get_sq_size(cfg_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_get_rq_size(cfg_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_get_compl_channel(cfg_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_get_srq(cfg_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_get_timeout(nullptr, nullptr), RPMA_E_INVAL);
}

TEST(ToConnCfg, NullIsTheDefaults) {
  EXPECT_EQ(arpma::capi::to_conn_cfg(nullptr), arpma::conn_cfg{});
  EXPECT_EQ(arpma::capi::srq_of(nullptr), nullptr);
}

TEST_F(ConnCfg, ToConnCfgCopiesEveryField) {
  ASSERT_EQ(rpma_conn_cfg_set_timeout(cfg_, 250), 0);
  ASSERT_EQ(rpma_conn_cfg_set_cq_size(cfg_, 64), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg_, 32), 0);
  ASSERT_EQ(rpma_conn_cfg_set_sq_size(cfg_, 16), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rq_size(cfg_, 8), 0);
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg_, true), 0);
  const arpma::conn_cfg value = arpma::capi::to_conn_cfg(cfg_);
  EXPECT_EQ(value.timeout, 250ms);
  EXPECT_EQ(value.cq_size, 64u);
  EXPECT_EQ(value.rcq_size, 32u);
  EXPECT_EQ(value.sq_size, 16u);
  EXPECT_EQ(value.rq_size, 8u);
  EXPECT_TRUE(value.shared_completion_channel);
  // A copy: later changes to the C object do not reach it.
  ASSERT_EQ(rpma_conn_cfg_set_cq_size(cfg_, 1), 0);
  EXPECT_EQ(value.cq_size, 64u);
}

TEST_F(ConnCfg, SrqOf) {
  EXPECT_EQ(arpma::capi::srq_of(cfg_), nullptr);
  ASSERT_EQ(rpma_conn_cfg_set_srq(cfg_, dummy_srq(2)), 0);
  EXPECT_EQ(arpma::capi::srq_of(cfg_), dummy_srq(2));
}

TEST_F(ConnCfg, ZeroTimeoutConverts) {
  ASSERT_EQ(rpma_conn_cfg_set_timeout(cfg_, 0), 0);
  EXPECT_EQ(arpma::capi::to_conn_cfg(cfg_).timeout, 0ms);
}

// The fields are atomics: one object may be used from several threads.
TEST_F(ConnCfg, ConcurrentSettersAndGetters) {
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([cfg = cfg_, t] {
      for (uint32_t i = 0; i < 2000; ++i) {
        (void)rpma_conn_cfg_set_cq_size(cfg, t * 10000 + i);
        uint32_t got = 0;
        (void)rpma_conn_cfg_get_cq_size(cfg, &got);
        (void)arpma::capi::to_conn_cfg(cfg);
      }
    });
  }
  for (auto& th : threads) th.join();
  uint32_t got = 0;
  ASSERT_EQ(rpma_conn_cfg_get_cq_size(cfg_, &got), 0);
  EXPECT_EQ(got % 10000, 1999u);
}

}  // namespace

}  // namespace conn_cfg_capi_test
