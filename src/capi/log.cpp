// rpma_log_*: librpma 1.3's logging API (src/log.c) over arpma's log sink.
#include <librpma.h>

#include "arpma/log.hpp"
#include "capi/enum_value.hpp"

#include <new>
#include <string>
#include <string_view>
#include <system_error>

namespace {

using arpma::capi::int_value;

bool known_threshold(int threshold) noexcept {
  return threshold == RPMA_LOG_THRESHOLD || threshold == RPMA_LOG_THRESHOLD_AUX;
}

bool known_level(int level) noexcept {
  return level >= RPMA_LOG_DISABLED && level <= RPMA_LOG_LEVEL_DEBUG;
}

}  // namespace

extern "C" {

// librpma 1.3 may also return RPMA_E_AGAIN when a concurrent call wins its
// compare-and-swap; arpma's store always succeeds.
int rpma_log_set_threshold(enum rpma_log_threshold threshold, enum rpma_log_level level) {
  const int t = int_value(threshold);
  const int l = int_value(level);
  if (!known_threshold(t) || !known_level(l)) return RPMA_E_INVAL;
  const std::error_code ec = arpma::set_log_threshold(static_cast<arpma::log_threshold>(t),
                                                      static_cast<arpma::log_level>(l));
  return ec ? RPMA_E_INVAL : 0;
}

int rpma_log_get_threshold(enum rpma_log_threshold threshold, enum rpma_log_level* level) {
  const int t = int_value(threshold);
  if (!known_threshold(t)) return RPMA_E_INVAL;
  if (level == nullptr) return RPMA_E_INVAL;
  *level =
      static_cast<rpma_log_level>(arpma::get_log_threshold(static_cast<arpma::log_threshold>(t)));
  return 0;
}

// The user's function gets each message already formatted, as "%s\n" and the
// text: arpma builds its messages in C++, so there is no original va_list;
// the newline is librpma's, which appends one to every format.
int rpma_log_set_function(rpma_log_function* log_function) {
  try {
    if (log_function == RPMA_LOG_USE_DEFAULT_FUNCTION) {
      arpma::set_log_sink({});
      return 0;
    }
    arpma::set_log_sink([log_function](arpma::log_level level, const char* file, int line,
                                       const char* function, std::string_view message) {
      const std::string text(message);  // the view need not be NUL-terminated
      log_function(static_cast<rpma_log_level>(level), file, line, function, "%s\n", text.c_str());
    });
    return 0;
  } catch (const std::bad_alloc&) {
    return RPMA_E_NOMEM;
  } catch (...) {
    return RPMA_E_UNKNOWN;
  }
}

}  // extern "C"
