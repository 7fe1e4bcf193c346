// rpma_log_*: librpma 1.3's src/log.c checks, and a user logging function
// receiving what arpma logs.
#include <librpma.h>

#include "arpma/log.hpp"
#include "support/log.hpp"

#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace log_capi_test {

namespace {

struct captured {
  rpma_log_level level;
  std::string file;
  int line;
  std::string function;
  std::string format;
  std::string message;
};

std::mutex captured_mutex;
std::vector<captured> captured_messages;

std::vector<captured> take_captured() {
  const std::lock_guard lock(captured_mutex);
  return std::exchange(captured_messages, {});
}

}  // namespace

// A user logging function, as a C program would write it.
extern "C" void test_log_function(enum rpma_log_level level, const char* file_name,
                                  const int line_no, const char* function_name,
                                  const char* message_format, ...) {
  char text[2048];
  va_list args;
  va_start(args, message_format);
  std::vsnprintf(text, sizeof text, message_format, args);
  va_end(args);
  const std::lock_guard lock(captured_mutex);
  captured_messages.push_back(
      {level, file_name, line_no, function_name, message_format, std::string(text)});
}

namespace {

// Saves and restores both thresholds and the logging function.
class LogCapi : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &primary_), 0);
    ASSERT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, &aux_), 0);
    (void)take_captured();
  }
  void TearDown() override {
    EXPECT_EQ(rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION), 0);
    EXPECT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, primary_), 0);
    EXPECT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, aux_), 0);
    (void)take_captured();
  }

 private:
  rpma_log_level primary_ = RPMA_LOG_DISABLED;
  rpma_log_level aux_ = RPMA_LOG_DISABLED;
};

TEST_F(LogCapi, DefaultThresholds) {
  rpma_log_level level = RPMA_LOG_DISABLED;
  ASSERT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &level), 0);
#ifdef NDEBUG
  EXPECT_EQ(level, RPMA_LOG_LEVEL_WARNING);
#else
  EXPECT_EQ(level, RPMA_LOG_LEVEL_DEBUG);
#endif
  ASSERT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, &level), 0);
#ifdef NDEBUG
  EXPECT_EQ(level, RPMA_LOG_DISABLED);
#else
  EXPECT_EQ(level, RPMA_LOG_LEVEL_WARNING);
#endif
}

TEST_F(LogCapi, EnumValues) {
  EXPECT_EQ(RPMA_LOG_DISABLED, -1);
  EXPECT_EQ(RPMA_LOG_LEVEL_FATAL, 0);
  EXPECT_EQ(RPMA_LOG_LEVEL_ERROR, 1);
  EXPECT_EQ(RPMA_LOG_LEVEL_WARNING, 2);
  EXPECT_EQ(RPMA_LOG_LEVEL_NOTICE, 3);
  EXPECT_EQ(RPMA_LOG_LEVEL_INFO, 4);
  EXPECT_EQ(RPMA_LOG_LEVEL_DEBUG, 5);
  EXPECT_EQ(RPMA_LOG_THRESHOLD, 0);
  EXPECT_EQ(RPMA_LOG_THRESHOLD_AUX, 1);
  EXPECT_EQ(RPMA_LOG_THRESHOLD_MAX, 2);
}

TEST_F(LogCapi, SetGetRoundTrip) {
  for (int v = RPMA_LOG_DISABLED; v <= RPMA_LOG_LEVEL_DEBUG; ++v) {
    const auto level = static_cast<rpma_log_level>(v);
    for (const auto t : {RPMA_LOG_THRESHOLD, RPMA_LOG_THRESHOLD_AUX}) {
      ASSERT_EQ(rpma_log_set_threshold(t, level), 0) << t << " " << v;
      rpma_log_level got = static_cast<rpma_log_level>(-7);
      ASSERT_EQ(rpma_log_get_threshold(t, &got), 0);
      EXPECT_EQ(got, level);
      // The C++ side sees the same thresholds.
      EXPECT_EQ(static_cast<int>(arpma::get_log_threshold(static_cast<arpma::log_threshold>(t))),
                v);
    }
  }
}

TEST_F(LogCapi, ThresholdsAreIndependent) {
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_INFO), 0);
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_FATAL), 0);
  rpma_log_level primary = RPMA_LOG_DISABLED, aux = RPMA_LOG_DISABLED;
  ASSERT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &primary), 0);
  ASSERT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, &aux), 0);
  EXPECT_EQ(primary, RPMA_LOG_LEVEL_INFO);
  EXPECT_EQ(aux, RPMA_LOG_LEVEL_FATAL);
}

TEST_F(LogCapi, InvalidThresholdIsRejected) {
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_NOTICE), 0);
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_ERROR), 0);
  // C++ code may only form values within the enum's range (0..3 here);
  // capi_args.c passes arbitrary ints the way C programs can.
  for (const int t : {static_cast<int>(RPMA_LOG_THRESHOLD_MAX), 3}) {
    const auto threshold = static_cast<rpma_log_threshold>(t);
    EXPECT_EQ(rpma_log_set_threshold(threshold, RPMA_LOG_LEVEL_DEBUG), RPMA_E_INVAL) << t;
    rpma_log_level level = static_cast<rpma_log_level>(-7);
    EXPECT_EQ(rpma_log_get_threshold(threshold, &level), RPMA_E_INVAL) << t;
    EXPECT_EQ(level, static_cast<rpma_log_level>(-7)) << t;
    EXPECT_EQ(rpma_log_get_threshold(threshold, nullptr), RPMA_E_INVAL) << t;
  }
  rpma_log_level primary = RPMA_LOG_DISABLED, aux = RPMA_LOG_DISABLED;
  ASSERT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &primary), 0);
  ASSERT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, &aux), 0);
  EXPECT_EQ(primary, RPMA_LOG_LEVEL_NOTICE);
  EXPECT_EQ(aux, RPMA_LOG_LEVEL_ERROR);
}

TEST_F(LogCapi, InvalidLevelIsRejected) {
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_NOTICE), 0);
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_ERROR), 0);
  for (const int v : {-2, 6, 7, -8}) {  // the enum's range is -8..7
    const auto level = static_cast<rpma_log_level>(v);
    EXPECT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, level), RPMA_E_INVAL) << v;
    EXPECT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, level), RPMA_E_INVAL) << v;
  }
  rpma_log_level primary = RPMA_LOG_DISABLED, aux = RPMA_LOG_DISABLED;
  ASSERT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &primary), 0);
  ASSERT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, &aux), 0);
  EXPECT_EQ(primary, RPMA_LOG_LEVEL_NOTICE);
  EXPECT_EQ(aux, RPMA_LOG_LEVEL_ERROR);
}

TEST_F(LogCapi, NullLevelPointerIsRejected) {
  EXPECT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, nullptr), RPMA_E_INVAL);
}

TEST_F(LogCapi, UserFunctionReceivesArpmaMessages) {
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_NOTICE), 0);
  ASSERT_EQ(rpma_log_set_function(test_log_function), 0);
  const int line = __LINE__ + 1;
  ARPMA_LOG(arpma::log_level::notice, "Requesting a connection to %s:%s", "127.0.0.1", "7204");
  ARPMA_LOG(arpma::log_level::info, "filtered out by the main threshold");
  ARPMA_LOG(arpma::log_level::error, "100%% of %d", 3);
  const auto got = take_captured();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].level, RPMA_LOG_LEVEL_NOTICE);
  EXPECT_EQ(got[0].file, __FILE__);
  EXPECT_EQ(got[0].line, line);
  EXPECT_EQ(got[0].function, "TestBody");
  EXPECT_EQ(got[0].format, "%s\n");  // librpma appends a newline to every format
  EXPECT_EQ(got[0].message, "Requesting a connection to 127.0.0.1:7204\n");
  EXPECT_EQ(got[1].level, RPMA_LOG_LEVEL_ERROR);
  // A '%' in the text reaches the user intact: it is an argument, not the format.
  EXPECT_EQ(got[1].message, "100% of 3\n");
}

TEST_F(LogCapi, UserFunctionReceivesDirectDetailCalls) {
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_DEBUG), 0);
  ASSERT_EQ(rpma_log_set_function(test_log_function), 0);
  arpma::detail::log_message(arpma::log_level::debug, "somefile.c", 17, "somefunc", "n=%d", 5);
  const auto got = take_captured();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].level, RPMA_LOG_LEVEL_DEBUG);
  EXPECT_EQ(got[0].file, "somefile.c");
  EXPECT_EQ(got[0].line, 17);
  EXPECT_EQ(got[0].function, "somefunc");
  EXPECT_EQ(got[0].message, "n=5\n");
}

TEST_F(LogCapi, DisabledMainThresholdSilencesTheUserFunction) {
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_DISABLED), 0);
  ASSERT_EQ(rpma_log_set_function(test_log_function), 0);
  ARPMA_LOG(arpma::log_level::fatal, "dropped");
  EXPECT_TRUE(take_captured().empty());
}

TEST_F(LogCapi, DefaultFunctionRestoresTheDefault) {
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_DEBUG), 0);
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_ERROR), 0);
  ASSERT_EQ(rpma_log_set_function(test_log_function), 0);
  ASSERT_EQ(rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION), 0);
  ::testing::internal::CaptureStderr();
  ARPMA_LOG(arpma::log_level::error, "default-sink-message %d", 9);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(take_captured().empty());
  EXPECT_NE(err.find("default-sink-message 9"), std::string::npos) << err;
}

TEST_F(LogCapi, DefaultFunctionWhenAlreadyDefaultIsFine) {
  EXPECT_EQ(rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION), 0);
  EXPECT_EQ(rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION), 0);
}

TEST_F(LogCapi, CxxSinkAndCFunctionReplaceEachOther) {
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_DEBUG), 0);
  std::vector<std::string> cxx;
  ASSERT_EQ(rpma_log_set_function(test_log_function), 0);
  arpma::set_log_sink([&cxx](arpma::log_level, const char*, int, const char*,
                             std::string_view message) { cxx.emplace_back(message); });
  ARPMA_LOG(arpma::log_level::error, "one");
  EXPECT_TRUE(take_captured().empty());
  ASSERT_EQ(cxx.size(), 1u);
  ASSERT_EQ(rpma_log_set_function(test_log_function), 0);
  ARPMA_LOG(arpma::log_level::error, "two");
  EXPECT_EQ(cxx.size(), 1u);
  const auto got = take_captured();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].message, "two\n");
}

}  // namespace

}  // namespace log_capi_test
