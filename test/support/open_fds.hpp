// Counting this process's descriptors: the leak checks after peer deaths, soak rounds and
// link teardowns compare it before and after.
#pragma once

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

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

/// The events every epoll instance of this process watches `fd` for, one per instance
/// (/proc/self/fdinfo: "tfd: FD events: MASK ...").
inline std::vector<unsigned> epoll_masks_of(int fd) {
  std::vector<unsigned> masks;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fdinfo")) {
    std::ifstream info(entry.path());
    for (std::string line; std::getline(info, line);) {
      std::istringstream in(line);
      std::string tag, events_tag;
      int target = -1;
      unsigned mask = 0;
      if (in >> tag >> target >> events_tag >> std::hex >> mask && tag == "tfd:" && target == fd &&
          events_tag == "events:")
        masks.push_back(mask);
    }
  }
  return masks;
}

/// The descriptors any epoll instance of this process watches.
inline std::set<int> epoll_watched_fds() {
  std::set<int> fds;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fdinfo")) {
    std::ifstream info(entry.path());
    for (std::string line; std::getline(info, line);) {
      std::istringstream in(line);
      std::string tag;
      int target = -1;
      if (in >> tag >> target && tag == "tfd:") fds.insert(target);
    }
  }
  return fds;
}

}  // namespace arpma::test
