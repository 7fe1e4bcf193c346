#include "arpma/log.hpp"
#include "arpma/error.hpp"
#include "support/log.hpp"

#include <sys/syscall.h>
#include <syslog.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>

namespace arpma {
namespace {

#ifdef NDEBUG
constexpr log_level default_primary = log_level::warning;
constexpr log_level default_aux = log_level::disabled;
#else
constexpr log_level default_primary = log_level::debug;
constexpr log_level default_aux = log_level::warning;
#endif

}  // namespace

// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
std::atomic<int> detail::log_primary_threshold{static_cast<int>(default_primary)};

namespace {

std::atomic<int> aux_threshold{static_cast<int>(default_aux)};

std::atomic<int>& threshold_of(int index) {
  return index == 0 ? detail::log_primary_threshold : aux_threshold;
}

int syslog_priority(log_level level) {
  switch (level) {
    case log_level::fatal: return LOG_CRIT;
    case log_level::error: return LOG_ERR;
    case log_level::warning: return LOG_WARNING;
    case log_level::notice: return LOG_NOTICE;
    case log_level::info: return LOG_INFO;
    default: return LOG_DEBUG;
  }
}

const char* level_name(log_level level) {
  switch (level) {
    case log_level::fatal: return "*FATAL*";
    case log_level::error: return "*ERROR*";
    case log_level::warning: return "*WARNING*";
    case log_level::notice: return "*NOTICE*";
    case log_level::info: return "*INFO*";
    case log_level::debug: return "*DEBUG*";
    default: return "";
  }
}

// librpma's default: everything that passed the primary threshold to syslog,
// and to stderr (with time and thread id) when it is also within aux.
void default_sink(log_level level, const char* file, int line, const char* function,
                  std::string_view message) {
  const int len = static_cast<int>(message.size());
  syslog(syslog_priority(level), "%s: %d: %s: %.*s", file, line, function, len, message.data());
  if (static_cast<int>(level) > aux_threshold.load()) return;
  char stamp[32] = "";
  timespec ts{};
  tm parts{};
  if (clock_gettime(CLOCK_REALTIME, &ts) == 0 && localtime_r(&ts.tv_sec, &parts) != nullptr)
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &parts);
  std::fprintf(stderr, "%s.%06ld [%ld] %s %s: %d: %s: %.*s\n", stamp, ts.tv_nsec / 1000,
               static_cast<long>(syscall(SYS_gettid)), level_name(level), file, line, function, len,
               message.data());
}

struct sink_holder {
  std::mutex mutex;
  std::shared_ptr<const log_sink> sink;
};

sink_holder& holder() {
  static sink_holder instance;
  return instance;
}

// openlog/closelog bracket the library's lifetime, as librpma's constructor does.
// LOG_NDELAY: the socket to /dev/log opens now, not at the first message, so
// a process's descriptors do not change under it when a connection first
// fails (the fd-counting tests on a host with journald saw one "leaked").
struct syslog_session {
  syslog_session() noexcept { openlog("rpma", LOG_PID | LOG_NDELAY, LOG_LOCAL7); }
  ~syslog_session() { closelog(); }
} const session;

}  // namespace

void set_log_sink(log_sink sink) {
  auto next = sink ? std::make_shared<const log_sink>(std::move(sink)) : nullptr;
  auto& h = holder();
  const std::lock_guard lock(h.mutex);
  h.sink = std::move(next);
}

std::error_code set_log_threshold(log_threshold threshold, log_level level) noexcept {
  const int index = static_cast<int>(threshold);
  const int value = static_cast<int>(level);
  if (index < 0 || index > 1 || value < static_cast<int>(log_level::disabled) ||
      value > static_cast<int>(log_level::debug))
    return make_error_code(errc::invalid_argument);
  threshold_of(index).store(value);
  return {};
}

log_level get_log_threshold(log_threshold threshold) noexcept {
  const int index = static_cast<int>(threshold);
  if (index < 0 || index > 1) return log_level::disabled;
  return static_cast<log_level>(threshold_of(index).load());
}

namespace detail {

void log_message(log_level level, const char* file, int line, const char* function,
                 const char* format, ...) noexcept {
  if (!log_wanted(level)) return;
  char text[1024];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  if (n < 0) return;
  const std::string_view message(text, std::min<std::size_t>(n, sizeof text - 1));
  std::shared_ptr<const log_sink> sink;
  {
    auto& h = holder();
    const std::lock_guard lock(h.mutex);
    sink = h.sink;
  }
  try {
    if (sink)
      (*sink)(level, file, line, function, message);
    else
      default_sink(level, file, line, function, message);
  } catch (...) {
    // A throwing user sink must not unwind through C callers.
  }
}

void log_failure(const char* file, int line, const char* function, const char* what,
                 const std::error_code& ec) noexcept {
  try {
    const std::string msg = ec.message();
    const bool is_errno =
        ec.category() == std::system_category() || ec.category() == std::generic_category();
    log_message(log_level::error, file, line, function, "%s: %s (%s %d)", what, msg.c_str(),
                is_errno ? "errno" : ec.category().name(), ec.value());
  } catch (...) {
  }
}

}  // namespace detail
}  // namespace arpma
