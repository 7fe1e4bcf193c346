// Internal logging entry point used by every layer.
#pragma once

#include "arpma/log.hpp"

#include <system_error>

namespace arpma::detail {

/// Formats and delivers one message if `level` passes the primary threshold.
void log_message(log_level level, const char* file, int line, const char* function,
                 const char* format, ...) noexcept __attribute__((format(printf, 5, 6)));

/// Logs "`what`: <message> (errno N)" at error level for a failed call.
void log_failure(const char* file, int line, const char* function, const char* what,
                 const std::error_code& ec) noexcept;

}  // namespace arpma::detail

#define ARPMA_LOG(level, ...) \
  ::arpma::detail::log_message((level), __FILE__, __LINE__, __func__, __VA_ARGS__)
#define ARPMA_LOG_FAILURE(what, ec) \
  ::arpma::detail::log_failure(__FILE__, __LINE__, __func__, (what), (ec))

namespace arpma::provider {
using ::arpma::log_level;
}
