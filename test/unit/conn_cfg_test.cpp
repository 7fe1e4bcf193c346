// arpma::conn_cfg: librpma 1.3's connection defaults as a C++ value type.
#include "arpma/conn_cfg.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <type_traits>

namespace conn_cfg_test {

namespace {

using namespace std::chrono_literals;

TEST(ConnCfg, Defaults) {
  const arpma::conn_cfg cfg;
  EXPECT_EQ(cfg.timeout, 1000ms);
  EXPECT_EQ(cfg.cq_size, 10u);
  EXPECT_EQ(cfg.rcq_size, 0u);
  EXPECT_EQ(cfg.sq_size, 10u);
  EXPECT_EQ(cfg.rq_size, 10u);
  EXPECT_FALSE(cfg.shared_completion_channel);
}

// Compile-time facts, checked where they can fail: at build time.
// The named defaults.
static_assert(arpma::conn_cfg::default_timeout == 1000ms);
static_assert(arpma::conn_cfg::default_queue_size == 10u);
// A value: an aggregate (designated initialisation), copied without failing.
static_assert(std::is_aggregate_v<arpma::conn_cfg>);
static_assert(std::is_nothrow_default_constructible_v<arpma::conn_cfg>);
static_assert(std::is_nothrow_copy_constructible_v<arpma::conn_cfg>);
static_assert(std::is_nothrow_copy_assignable_v<arpma::conn_cfg>);

TEST(ConnCfg, EqualityComparesEveryField) {
  const arpma::conn_cfg base;
  EXPECT_EQ(base, arpma::conn_cfg{});
  auto changed = base;
  changed.timeout = 0ms;
  EXPECT_NE(changed, base);
  changed = base;
  changed.cq_size = 11;
  EXPECT_NE(changed, base);
  changed = base;
  changed.rcq_size = 1;
  EXPECT_NE(changed, base);
  changed = base;
  changed.sq_size = 1;
  EXPECT_NE(changed, base);
  changed = base;
  changed.rq_size = 1;
  EXPECT_NE(changed, base);
  changed = base;
  changed.shared_completion_channel = true;
  EXPECT_NE(changed, base);
}

TEST(ConnCfg, DesignatedInitialisation) {
  const arpma::conn_cfg cfg{.timeout = 250ms, .cq_size = 64, .rcq_size = 32};
  EXPECT_EQ(cfg.timeout, 250ms);
  EXPECT_EQ(cfg.cq_size, 64u);
  EXPECT_EQ(cfg.rcq_size, 32u);
  EXPECT_EQ(cfg.sq_size, 10u);
  EXPECT_EQ(cfg.rq_size, 10u);
  EXPECT_FALSE(cfg.shared_completion_channel);
}

}  // namespace

}  // namespace conn_cfg_test
