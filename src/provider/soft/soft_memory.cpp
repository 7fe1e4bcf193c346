#include "provider/soft/soft_memory.hpp"

#include "core/log_internal.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>

namespace arpma::provider::soft_mem {
namespace {

std::error_code sys(int err) noexcept { return {err, std::system_category()}; }

// process_vm_* name the process by pid; getpid() is a system call, so the pid
// is kept, and renewed in a forked child.
std::atomic<pid_t> own_pid{0};

void renew_pid() noexcept { own_pid.store(::getpid(), std::memory_order_relaxed); }

enum class guard_state : int { unknown, guarded, unguarded };
std::atomic<guard_state> guard{guard_state::unknown};

pid_t pid() noexcept {
  pid_t p = own_pid.load(std::memory_order_relaxed);
  if (p != 0) return p;
  static std::once_flag once;
  std::call_once(once, [] { (void)::pthread_atfork(nullptr, nullptr, renew_pid); });
  renew_pid();
  return own_pid.load(std::memory_order_relaxed);
}

/// A seccomp policy (containers without CAP_SYS_PTRACE) may refuse the calls:
/// found out once, with a copy of a local variable.
bool guarded() noexcept {
  const guard_state known = guard.load(std::memory_order_acquire);
  if (known != guard_state::unknown) return known == guard_state::guarded;
  std::uint64_t from = 1;
  std::uint64_t to = 0;
  iovec local{&to, sizeof to};
  iovec remote{&from, sizeof from};
  const bool ok = ::process_vm_readv(pid(), &local, 1, &remote, 1, 0) == sizeof to && to == 1;
  if (!ok)
    ARPMA_LOG(log_level::warning,
              "soft provider: process_vm_readv refused (errno %d); copies into registered memory "
              "are not fault-guarded",
              errno);
  guard.store(ok ? guard_state::guarded : guard_state::unguarded, std::memory_order_release);
  return ok;
}

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
  if (n == 0) return true;
  if (!guarded()) {
    std::memcpy(dst, src, n);
    return true;
  }
  iovec local{const_cast<void*>(src), n};
  iovec remote{dst, n};
  return ::process_vm_writev(pid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n);
}

bool copy_from_region(void* dst, const void* src, std::size_t n) noexcept {
  if (n == 0) return true;
  if (!guarded()) {
    std::memcpy(dst, src, n);
    return true;
  }
  iovec local{dst, n};
  iovec remote{const_cast<void*>(src), n};
  return ::process_vm_readv(pid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n);
}

bool store_u64_to_region(void* dst, std::uint64_t value) noexcept {
  // The kernel's copies are not one 8-byte store, so the store is ours, after
  // a probe that the page is still there (registration checked writability).
  std::uint64_t probe = 0;
  if (!copy_from_region(&probe, dst, sizeof probe)) return false;
  __atomic_store_n(static_cast<std::uint64_t*>(dst), value, __ATOMIC_RELEASE);
  return true;
}

bool copies_are_guarded() noexcept { return guarded(); }

}  // namespace arpma::provider::soft_mem
