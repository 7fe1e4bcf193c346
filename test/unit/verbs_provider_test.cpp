// The rdma-core provider on a machine without an RDMA device: every call that
// needs one fails cleanly with the provider's errno, and says so in the log.
#include "provider/verbs/verbs_provider.hpp"

#include "arpma/error.hpp"
#include "arpma/log.hpp"
#include "arpma/peer.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <librpma.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

namespace verbs_provider_test {

namespace {

bool rdma_device_present() {
  std::error_code ec;
  const std::filesystem::path dir("/sys/class/infiniband");
  return std::filesystem::exists(dir, ec) && !std::filesystem::is_empty(dir, ec);
}

class verbs_without_device : public ::testing::Test {
 protected:
  void SetUp() override {
    if (rdma_device_present()) GTEST_SKIP() << "an RDMA device exists here; see the rxe suite";
    ::setenv("ARPMA_PROVIDER", "verbs", 1);
    arpma::set_log_sink(
        [this](arpma::log_level, const char*, int, const char*, std::string_view message) {
          const std::lock_guard lock(mutex);
          logged.emplace_back(message);
        });
  }
  void TearDown() override { arpma::set_log_sink({}); }

  bool logged_errno(int err) {
    const std::lock_guard lock(mutex);
    const std::string needle = "errno " + std::to_string(err);
    for (const auto& line : logged)
      if (line.find(needle) != std::string::npos) return true;
    return false;
  }

  std::mutex mutex;
  std::vector<std::string> logged;
};

// A context no provider handed out is refused before anything reads through
// it (it used to reach ibv_alloc_pd): with or without an RDMA device here.
TEST(foreign_ibv_context, is_not_owned_and_peer_new_refuses_it) {
  arpma::provider::verbs_provider verbs;
  ibv_context zeroed{};
  alignas(ibv_context) std::array<unsigned char, sizeof(ibv_context)> garbage{};
  garbage.fill(0xa5);
  auto* garbage_context = reinterpret_cast<ibv_context*>(garbage.data());
  EXPECT_FALSE(verbs.owns(&zeroed));
  EXPECT_FALSE(verbs.owns(garbage_context));
  EXPECT_FALSE(verbs.owns(nullptr));
  auto* untouched = reinterpret_cast<rpma_peer*>(0x1);
  for (ibv_context* ctx : {&zeroed, garbage_context}) {
    rpma_peer* peer = untouched;
    EXPECT_EQ(rpma_peer_new(ctx, &peer), RPMA_E_INVAL);
    EXPECT_EQ(peer, untouched);
    EXPECT_FALSE(arpma::peer::create(ctx));
  }
}

TEST_F(verbs_without_device, cxx_device_lookup_reports_the_errno) {
  for (auto type : {arpma::ibv_context_type::local, arpma::ibv_context_type::remote}) {
    auto found = arpma::get_ibv_context("127.0.0.1", type);
    ASSERT_FALSE(found);
    EXPECT_EQ(found.error(), arpma::errc::provider);
    EXPECT_EQ(found.error(), std::errc::no_such_device) << found.error().message();
  }
  EXPECT_TRUE(logged_errno(ENODEV));
}

TEST_F(verbs_without_device, c_device_lookup_returns_provider_error) {
  auto* untouched = reinterpret_cast<ibv_context*>(0x1);
  ibv_context* ctx = untouched;
  EXPECT_EQ(rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx),
            RPMA_E_PROVIDER);
  EXPECT_EQ(rpma_utils_get_ibv_context("::1", RPMA_UTIL_IBV_CONTEXT_REMOTE, &ctx), RPMA_E_PROVIDER);
  EXPECT_EQ(ctx, untouched);
  EXPECT_TRUE(logged_errno(ENODEV));
}

TEST_F(verbs_without_device, connection_manager_calls_fail_cleanly) {
  arpma::provider::verbs_provider verbs;
  auto channel = verbs.create_event_channel();
  ASSERT_FALSE(channel);
  EXPECT_EQ(channel.error(), arpma::errc::provider);
  auto id = verbs.create_id(nullptr, 1);
  ASSERT_FALSE(id);
  EXPECT_EQ(id.error(), arpma::errc::provider);
  EXPECT_NE(id.error().value(), 0);
}

}  // namespace

}  // namespace verbs_provider_test
