// Logging: one process-wide sink shared by the C API (rpma_log_*) and C++.
#pragma once

#include <functional>
#include <string_view>
#include <system_error>

namespace arpma {

/// Severity; the values are librpma's RPMA_LOG_* levels.
enum class log_level : int {
  disabled = -1,
  fatal = 0,
  error = 1,
  warning = 2,
  notice = 3,
  info = 4,
  debug = 5,
};

/// Which threshold: `primary` filters every message before it reaches the
/// sink; `aux` decides which of those the default sink also writes to stderr.
enum class log_threshold : int { primary = 0, aux = 1 };

/// Receives each message that passed the primary threshold, already formatted.
/// May be called from any thread that calls into arpma.
using log_sink = std::function<void(log_level level, const char* file, int line,
                                    const char* function, std::string_view message)>;

/// \param sink the new sink; called with the level, source location and text.
/// Installs `sink`; an empty function restores the default sink (syslog, plus
/// stderr for messages at or below the aux threshold) — the same sink that
/// `rpma_log_set_function` replaces.
void set_log_sink(log_sink sink);

/// Sets a threshold.
/// \param threshold which one
/// \param level     messages above it are dropped (primary) or not printed (aux)
/// \return errc::invalid_argument for a level outside [disabled, debug] or an
/// unknown threshold; otherwise success.
std::error_code set_log_threshold(log_threshold threshold, log_level level) noexcept;

/// Reads a threshold (release builds: primary = warning, aux = disabled;
/// debug builds: primary = debug, aux = warning).
[[nodiscard]] log_level get_log_threshold(log_threshold threshold) noexcept;

}  // namespace arpma
