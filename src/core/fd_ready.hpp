// File-descriptor modes the channels need: whether there is something to read
// now (drains read only what is there, whatever mode a C program set), and
// librpma's blocking default for the fds the C API hands out.
#pragma once

#include <fcntl.h>
#include <poll.h>

#include <cerrno>
#include <system_error>

namespace arpma::detail {

[[nodiscard]] inline bool readable(int fd) noexcept {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
}

inline std::error_code set_fd_blocking(int fd, bool blocking) noexcept {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return {errno, std::system_category()};
  const int wanted = blocking ? (flags & ~O_NONBLOCK) : (flags | O_NONBLOCK);
  if (wanted != flags && ::fcntl(fd, F_SETFL, wanted) < 0) return {errno, std::system_category()};
  return {};
}

}  // namespace arpma::detail
