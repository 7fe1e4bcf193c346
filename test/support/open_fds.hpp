// Counting this process's descriptors: the leak checks after peer deaths, soak rounds and
// link teardowns compare it before and after.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <system_error>

namespace arpma::test {

/// Open descriptors of this process, every kind (the directory iterator's own included, the
/// same in each count).
inline std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

/// What each open descriptor is ("3 -> socket:[1234]", one a line), for a failure message.
inline std::string fd_targets() {
  std::string out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(entry.path(), ec);
    out += entry.path().filename().string() + " -> " + (ec ? "?" : target.string()) + "\n";
  }
  return out;
}

}  // namespace arpma::test
