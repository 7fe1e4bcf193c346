#include "provider/soft/soft_memory.hpp"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>

namespace arpma::provider::soft_mem {
namespace {

std::error_code sys(int err) noexcept { return {err, std::system_category()}; }

// ---- fault-recovering copies ------------------------------------------------------
//
// A copy into or out of registered memory runs with this thread's recovery
// point set; a SIGSEGV or SIGBUS while it is set (the page was unmapped, or a
// file behind it truncated) jumps back to it, and the copy reports failure.
// Any other fault goes to the handler that was installed before ours, or to
// the default action, exactly as if ours were not there. Steady-state cost:
// a sigsetjmp without the signal mask (no system call) and two stores.

thread_local sigjmp_buf* recovery = nullptr;

struct sigaction previous_segv {};
struct sigaction previous_bus {};
std::atomic<bool> installed{false};
std::atomic<bool> bypass{false};  ///< unguarded_for_benchmark

void chain(int sig, siginfo_t* info, void* context) {
  const struct sigaction& previous = sig == SIGSEGV ? previous_segv : previous_bus;
  if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(sig, info, context);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
  } else {
    // Returning re-executes the faulting instruction under the default action.
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    (void)::sigaction(sig, &fallback, nullptr);
  }
}

void on_fault(int sig, siginfo_t* info, void* context) {
  if (sigjmp_buf* point = recovery; point != nullptr) {
    recovery = nullptr;
    siglongjmp(*point, 1);  // SA_NODEFER: the signal is not left blocked
  }
  chain(sig, info, context);
}

bool install() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    // Only a bad argument makes sigaction fail; copies_are_guarded() says so.
    const bool ok = ::sigaction(SIGSEGV, &action, &previous_segv) == 0 &&
                    ::sigaction(SIGBUS, &action, &previous_bus) == 0;
    installed.store(ok, std::memory_order_release);
  });
  return installed.load(std::memory_order_acquire);
}

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer neither hands the program a fault taken inside its own
// interceptors (memcpy, atomics) nor survives the jump out of the handler:
// under it the copies go through the kernel instead, which reports EFAULT
// (a system call each; TSan builds are not measured).
bool kernel_copy(void* dst, const void* src, std::size_t n, bool into_region) noexcept {
  iovec local{into_region ? const_cast<void*>(src) : dst, n};
  iovec remote{into_region ? dst : const_cast<void*>(src), n};
  const ssize_t done = into_region ? ::process_vm_writev(::getpid(), &local, 1, &remote, 1, 0)
                                   : ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0);
  return done == static_cast<ssize_t>(n);
}
#endif

template <class Access>
bool guarded(Access access) noexcept {
  if (!install() || bypass.load(std::memory_order_relaxed)) {
    access();
    return true;
  }
  sigjmp_buf point;
  if (sigsetjmp(point, 0) != 0) return false;  // came back from on_fault
  recovery = &point;
  std::atomic_signal_fence(std::memory_order_seq_cst);  // set before the access
  access();
  std::atomic_signal_fence(std::memory_order_seq_cst);  // cleared after it
  recovery = nullptr;
  return true;
}

// ---- registration ------------------------------------------------------------

bool read_maps(std::string& out) {
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char chunk[4096];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return n == 0;
    }
    out.append(chunk, static_cast<std::size_t>(n));
  }
}

struct mapping {
  std::uintptr_t start = 0;
  std::uintptr_t end = 0;
  bool readable = false;
  bool writable = false;
};

/// "start-end perms ..." of one line of /proc/self/maps.
bool parse_mapping(std::string_view line, mapping& m) {
  const auto dash = line.find('-');
  const auto space = line.find(' ');
  if (dash == std::string_view::npos || space == std::string_view::npos || dash > space ||
      line.size() < space + 3)
    return false;
  const char* first = line.data();
  if (std::from_chars(first, first + dash, m.start, 16).ec != std::errc{}) return false;
  if (std::from_chars(first + dash + 1, first + space, m.end, 16).ec != std::errc{}) return false;
  m.readable = line[space + 1] == 'r';
  m.writable = line[space + 2] == 'w';
  return true;
}

}  // namespace

std::error_code check_registrable(const void* addr, std::size_t length, bool writable) {
  const auto begin = reinterpret_cast<std::uintptr_t>(addr);
  if (addr == nullptr || length == 0 || length > UINTPTR_MAX - begin) return sys(EINVAL);
  (void)install();  // before any copy can need it, on the registering thread
  const std::uintptr_t end = begin + length;
  std::string maps;
  if (!read_maps(maps)) return sys(errno != 0 ? errno : EIO);
  // The mappings are listed in address order: walk them from `begin`, and
  // any gap, unreadable or (when asked) unwritable piece is a fault.
  std::uintptr_t covered = begin;
  std::string_view rest(maps);
  while (!rest.empty() && covered < end) {
    const auto eol = rest.find('\n');
    const std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view{} : rest.substr(eol + 1);
    mapping m;
    if (!parse_mapping(line, m) || m.end <= covered) continue;
    if (m.start > covered || !m.readable || (writable && !m.writable)) return sys(EFAULT);
    covered = m.end;
  }
  return covered >= end ? std::error_code{} : sys(EFAULT);
}

bool copy_to_region(void* dst, const void* src, std::size_t n) noexcept {
#if defined(__SANITIZE_THREAD__)
  return n == 0 || kernel_copy(dst, src, n, true);
#else
  return n == 0 || guarded([&] { std::memcpy(dst, src, n); });
#endif
}

bool copy_from_region(void* dst, const void* src, std::size_t n) noexcept {
#if defined(__SANITIZE_THREAD__)
  return n == 0 || kernel_copy(dst, src, n, false);
#else
  return n == 0 || guarded([&] { std::memcpy(dst, src, n); });
#endif
}

bool store_u64_to_region(void* dst, std::uint64_t value) noexcept {
#if defined(__SANITIZE_THREAD__)
  // A probe, then the store: only memory taken away in between can fault.
  std::uint64_t probe = 0;
  if (!kernel_copy(&probe, dst, sizeof probe, false)) return false;
#endif
  return guarded(
      [&] { __atomic_store_n(static_cast<std::uint64_t*>(dst), value, __ATOMIC_RELEASE); });
}

bool copies_are_guarded() noexcept { return install() && !bypass.load(std::memory_order_relaxed); }

void unguarded_for_benchmark(bool off) noexcept { bypass.store(off, std::memory_order_relaxed); }

}  // namespace arpma::provider::soft_mem
