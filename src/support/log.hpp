// Internal logging entry point used by every layer.
#pragma once

#include "arpma/log.hpp"

#include <atomic>
#include <system_error>

namespace arpma::detail {

/// The primary threshold (set_log_threshold's), read where a message is made:
/// a message it filters out costs one load, not a call. rpma_cq_get_wc logs at
/// debug level at every empty poll, as librpma does, inside callers' spins.
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
extern std::atomic<int> log_primary_threshold;

[[nodiscard]] inline bool log_wanted(log_level level) noexcept {
  return static_cast<int>(level) <= log_primary_threshold.load(std::memory_order_relaxed);
}

/// Formats and delivers one message if `level` passes the primary threshold.
void log_message(log_level level, const char* file, int line, const char* function,
                 const char* format, ...) noexcept __attribute__((format(printf, 5, 6)));

/// Logs "`what`: <message> (errno N)" at error level for a failed call.
void log_failure(const char* file, int line, const char* function, const char* what,
                 const std::error_code& ec) noexcept;

}  // namespace arpma::detail

#define ARPMA_LOG(level, ...)                                                           \
  do {                                                                                  \
    if (::arpma::detail::log_wanted(level))                                             \
      ::arpma::detail::log_message((level), __FILE__, __LINE__, __func__, __VA_ARGS__); \
  } while (false)
#define ARPMA_LOG_FAILURE(what, ec) \
  ::arpma::detail::log_failure(__FILE__, __LINE__, __func__, (what), (ec))

namespace arpma::provider {
using ::arpma::log_level;
}
