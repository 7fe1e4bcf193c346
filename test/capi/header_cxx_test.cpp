// The C header compiles as C++ and its constants are arpma's.
#include <librpma.h>

#include "arpma/conn_cfg.hpp"
#include "arpma/error.hpp"
#include "arpma/log.hpp"

#include <gtest/gtest.h>

#include <type_traits>

namespace header_cxx_test {

namespace {

using arpma::errc;

static_assert(RPMA_E_UNKNOWN == static_cast<int>(errc::unknown));
static_assert(RPMA_E_NOSUPP == static_cast<int>(errc::not_supported));
static_assert(RPMA_E_PROVIDER == static_cast<int>(errc::provider));
static_assert(RPMA_E_NOMEM == static_cast<int>(errc::no_memory));
static_assert(RPMA_E_INVAL == static_cast<int>(errc::invalid_argument));
static_assert(RPMA_E_NO_COMPLETION == static_cast<int>(errc::no_completion));
static_assert(RPMA_E_NO_EVENT == static_cast<int>(errc::no_event));
static_assert(RPMA_E_AGAIN == static_cast<int>(errc::again));
static_assert(RPMA_E_SHARED_CHANNEL == static_cast<int>(errc::shared_channel));
static_assert(RPMA_E_NOT_SHARED_CHNL == static_cast<int>(errc::not_shared_channel));

static_assert(RPMA_DEFAULT_TIMEOUT_MS == arpma::conn_cfg::default_timeout.count());
static_assert(RPMA_W_WAIT_FOR_COMPLETION == 1);

static_assert(RPMA_LOG_DISABLED == static_cast<int>(arpma::log_level::disabled));
static_assert(RPMA_LOG_LEVEL_FATAL == static_cast<int>(arpma::log_level::fatal));
static_assert(RPMA_LOG_LEVEL_ERROR == static_cast<int>(arpma::log_level::error));
static_assert(RPMA_LOG_LEVEL_WARNING == static_cast<int>(arpma::log_level::warning));
static_assert(RPMA_LOG_LEVEL_NOTICE == static_cast<int>(arpma::log_level::notice));
static_assert(RPMA_LOG_LEVEL_INFO == static_cast<int>(arpma::log_level::info));
static_assert(RPMA_LOG_LEVEL_DEBUG == static_cast<int>(arpma::log_level::debug));
static_assert(RPMA_LOG_THRESHOLD == static_cast<int>(arpma::log_threshold::primary));
static_assert(RPMA_LOG_THRESHOLD_AUX == static_cast<int>(arpma::log_threshold::aux));
static_assert(RPMA_LOG_THRESHOLD_MAX == 2);

static_assert(RPMA_UTIL_IBV_CONTEXT_LOCAL == 0 && RPMA_UTIL_IBV_CONTEXT_REMOTE == 1);
static_assert(RPMA_CONN_UNDEFINED == -1 && RPMA_CONN_ESTABLISHED == 0 && RPMA_CONN_CLOSED == 1 &&
              RPMA_CONN_LOST == 2 && RPMA_CONN_REJECTED == 3 && RPMA_CONN_UNREACHABLE == 4);

// The layout librpma's users rely on.
static_assert(std::is_standard_layout_v<rpma_conn_private_data>);
static_assert(std::is_same_v<decltype(rpma_conn_private_data::ptr), void*>);
static_assert(std::is_same_v<decltype(rpma_conn_private_data::len), uint8_t>);

// The declarations have the exact librpma 1.3 signatures.
static_assert(std::is_same_v<decltype(&rpma_err_2str), const char* (*)(int)>);
static_assert(
    std::is_same_v<decltype(&rpma_conn_cfg_get_timeout), int (*)(const rpma_conn_cfg*, int*)>);
static_assert(
    std::is_same_v<decltype(&rpma_conn_req_new), int (*)(rpma_peer*, const char*, const char*,
                                                         const rpma_conn_cfg*, rpma_conn_req**)>);
static_assert(std::is_same_v<decltype(&rpma_log_set_function), int (*)(rpma_log_function*)>);

TEST(HeaderCxx, ConstantsMatchAtRunTime) {
  EXPECT_EQ(arpma::make_error_code(errc::invalid_argument).value(), RPMA_E_INVAL);
  EXPECT_EQ(arpma::to_rpma_error(arpma::make_error_code(errc::no_memory)), RPMA_E_NOMEM);
  EXPECT_STREQ(rpma_err_2str(RPMA_E_INVAL), "Invalid argument");
  rpma_log_function* const default_function = RPMA_LOG_USE_DEFAULT_FUNCTION;
  EXPECT_EQ(default_function, nullptr);
}

}  // namespace

}  // namespace header_cxx_test
