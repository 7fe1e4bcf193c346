// arpma's log thresholds and sink (the C++ side of rpma_log_*).
#include "arpma/log.hpp"

#include "arpma/error.hpp"
#include "support/log.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace log_test {

namespace {

using arpma::log_level;
using arpma::log_threshold;

struct record {
  log_level level;
  std::string file;
  int line;
  std::string function;
  std::string message;
};

// Restores the thresholds and the default sink after each test.
class Log : public ::testing::Test {
 protected:
  void SetUp() override {
    primary_ = arpma::get_log_threshold(log_threshold::primary);
    aux_ = arpma::get_log_threshold(log_threshold::aux);
  }
  void TearDown() override {
    arpma::set_log_sink({});
    EXPECT_FALSE(arpma::set_log_threshold(log_threshold::primary, primary_));
    EXPECT_FALSE(arpma::set_log_threshold(log_threshold::aux, aux_));
  }

  void capture() {
    arpma::set_log_sink([this](log_level level, const char* file, int line, const char* function,
                               std::string_view message) {
      records_.push_back({level, file, line, function, std::string(message)});
    });
  }

  std::vector<record> records_;

 private:
  log_level primary_{};
  log_level aux_{};
};

TEST_F(Log, DefaultThresholdsOfThisBuildType) {
#ifdef NDEBUG
  EXPECT_EQ(arpma::get_log_threshold(log_threshold::primary), log_level::warning);
  EXPECT_EQ(arpma::get_log_threshold(log_threshold::aux), log_level::disabled);
#else
  EXPECT_EQ(arpma::get_log_threshold(log_threshold::primary), log_level::debug);
  EXPECT_EQ(arpma::get_log_threshold(log_threshold::aux), log_level::warning);
#endif
}

TEST_F(Log, LevelValuesAreLibrpmas) {
  EXPECT_EQ(static_cast<int>(log_level::disabled), -1);
  EXPECT_EQ(static_cast<int>(log_level::fatal), 0);
  EXPECT_EQ(static_cast<int>(log_level::error), 1);
  EXPECT_EQ(static_cast<int>(log_level::warning), 2);
  EXPECT_EQ(static_cast<int>(log_level::notice), 3);
  EXPECT_EQ(static_cast<int>(log_level::info), 4);
  EXPECT_EQ(static_cast<int>(log_level::debug), 5);
  EXPECT_EQ(static_cast<int>(log_threshold::primary), 0);
  EXPECT_EQ(static_cast<int>(log_threshold::aux), 1);
}

TEST_F(Log, SetGetEveryLevel) {
  for (int v = -1; v <= 5; ++v) {
    const auto level = static_cast<log_level>(v);
    for (const auto t : {log_threshold::primary, log_threshold::aux}) {
      EXPECT_FALSE(arpma::set_log_threshold(t, level)) << v;
      EXPECT_EQ(arpma::get_log_threshold(t), level) << v;
    }
  }
  // The two thresholds are independent.
  ASSERT_FALSE(arpma::set_log_threshold(log_threshold::primary, log_level::info));
  ASSERT_FALSE(arpma::set_log_threshold(log_threshold::aux, log_level::fatal));
  EXPECT_EQ(arpma::get_log_threshold(log_threshold::primary), log_level::info);
  EXPECT_EQ(arpma::get_log_threshold(log_threshold::aux), log_level::fatal);
}

TEST_F(Log, InvalidValuesRejected) {
  ASSERT_FALSE(arpma::set_log_threshold(log_threshold::primary, log_level::notice));
  ASSERT_FALSE(arpma::set_log_threshold(log_threshold::aux, log_level::error));
  const std::error_code invalid = arpma::make_error_code(arpma::errc::invalid_argument);
  for (const int v : {-2, 6, -100, 100}) {
    EXPECT_EQ(arpma::set_log_threshold(log_threshold::primary, static_cast<log_level>(v)), invalid)
        << v;
    EXPECT_EQ(arpma::set_log_threshold(log_threshold::aux, static_cast<log_level>(v)), invalid)
        << v;
  }
  for (const int t : {-1, 2, 7}) {
    EXPECT_EQ(arpma::set_log_threshold(static_cast<log_threshold>(t), log_level::debug), invalid)
        << t;
  }
  EXPECT_EQ(arpma::get_log_threshold(log_threshold::primary), log_level::notice);
  EXPECT_EQ(arpma::get_log_threshold(log_threshold::aux), log_level::error);
}

TEST_F(Log, SinkReceivesWhatPassesThePrimaryThreshold) {
  ASSERT_FALSE(arpma::set_log_threshold(log_threshold::primary, log_level::notice));
  capture();
  const int line = __LINE__ + 1;
  ARPMA_LOG(log_level::notice, "value=%d name=%s", 42, "x");
  ARPMA_LOG(log_level::info, "too verbose");
  ARPMA_LOG(log_level::debug, "too verbose");
  ARPMA_LOG(log_level::fatal, "fatal");
  ASSERT_EQ(records_.size(), 2u);
  EXPECT_EQ(records_[0].level, log_level::notice);
  EXPECT_EQ(records_[0].message, "value=42 name=x");
  EXPECT_EQ(records_[0].line, line);
  EXPECT_EQ(records_[0].file, __FILE__);
  EXPECT_EQ(records_[0].function, "TestBody");
  EXPECT_EQ(records_[1].level, log_level::fatal);
  EXPECT_EQ(records_[1].message, "fatal");
}

TEST_F(Log, DisabledPrimaryDropsEverything) {
  ASSERT_FALSE(arpma::set_log_threshold(log_threshold::primary, log_level::disabled));
  capture();
  ARPMA_LOG(log_level::fatal, "dropped");
  EXPECT_TRUE(records_.empty());
}

TEST_F(Log, AuxThresholdDoesNotFilterTheSink) {
  ASSERT_FALSE(arpma::set_log_threshold(log_threshold::primary, log_level::debug));
  ASSERT_FALSE(arpma::set_log_threshold(log_threshold::aux, log_level::disabled));
  capture();
  ARPMA_LOG(log_level::debug, "kept");
  ASSERT_EQ(records_.size(), 1u);
  EXPECT_EQ(records_[0].message, "kept");
}

TEST_F(Log, FailureMessageNamesTheCause) {
  ASSERT_FALSE(arpma::set_log_threshold(log_threshold::primary, log_level::error));
  capture();
  ARPMA_LOG_FAILURE("rdma_create_id()", std::error_code(ENODEV, std::system_category()));
  ASSERT_EQ(records_.size(), 1u);
  EXPECT_EQ(records_[0].level, log_level::error);
  EXPECT_NE(records_[0].message.find("rdma_create_id()"), std::string::npos);
  EXPECT_NE(records_[0].message.find("errno 19"), std::string::npos) << records_[0].message;
}

TEST_F(Log, LongMessagesAreTruncatedNotOverflowed) {
  ASSERT_FALSE(arpma::set_log_threshold(log_threshold::primary, log_level::error));
  capture();
  const std::string big(5000, 'a');
  ARPMA_LOG(log_level::error, "%s", big.c_str());
  ASSERT_EQ(records_.size(), 1u);
  EXPECT_GT(records_[0].message.size(), 0u);
  EXPECT_LT(records_[0].message.size(), big.size());
  EXPECT_EQ(records_[0].message.find_first_not_of('a'), std::string::npos);
}

TEST_F(Log, ThrowingSinkDoesNotPropagate) {
  ASSERT_FALSE(arpma::set_log_threshold(log_threshold::primary, log_level::error));
  arpma::set_log_sink([](log_level, const char*, int, const char*, std::string_view) {
    throw std::runtime_error("sink failed");
  });
  EXPECT_NO_THROW(ARPMA_LOG(log_level::error, "boom"));
}

TEST_F(Log, EmptySinkRestoresTheDefault) {
  ASSERT_FALSE(arpma::set_log_threshold(log_threshold::primary, log_level::debug));
  ASSERT_FALSE(arpma::set_log_threshold(log_threshold::aux, log_level::error));
  capture();
  arpma::set_log_sink({});
  ::testing::internal::CaptureStderr();
  ARPMA_LOG(log_level::error, "to-default-sink %d", 7);
  ARPMA_LOG(log_level::warning, "not-to-stderr");  // passes primary, above aux
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(records_.empty());
  EXPECT_NE(err.find("to-default-sink 7"), std::string::npos) << err;
  EXPECT_EQ(err.find("not-to-stderr"), std::string::npos) << err;
}

}  // namespace

}  // namespace log_test
