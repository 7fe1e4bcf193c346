// File-descriptor modes the channels need: whether there is something to read
// now (drains read only what is there, whatever mode a C program set), waiting
// for that on the loop, and librpma's blocking default for the fds the C API
// hands out.
#pragma once

#include "core/asio.hpp"

#include <poll.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <optional>
#include <system_error>
#include <utility>

namespace arpma::detail {

[[nodiscard]] inline bool readable(int fd) noexcept {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
}

/// Calls `on_ready(std::error_code)` on `ex` once `native_fd` is readable,
/// through an async_wait on `fd`, made on first use; the provider keeps
/// owning the fd. An fd made readable while nobody watched is seen too,
/// although the reactor is edge-triggered: Asio's epoll reactor re-arms the
/// descriptor (EPOLL_CTL_MOD) for every wait queued on an idle descriptor,
/// and the kernel then reports an fd that is readable already. (No poll(2)
/// first: it cost one per operation.)
template <class Handler>
void when_readable(std::optional<asio::posix::stream_descriptor>& fd,
                   const asio::any_io_executor& ex, int native_fd, Handler on_ready) {
  if (!fd) fd.emplace(ex, native_fd);
  fd->async_wait(asio::posix::stream_descriptor::wait_read, std::move(on_ready));
}

/// One ioctl(FIONBIO), not fcntl's F_GETFL and F_SETFL: a blocking C
/// connection makes three of its fds blocking, and every syscall counts
/// against librpma's rate.
inline std::error_code set_fd_blocking(int fd, bool blocking) noexcept {
  int non_blocking = blocking ? 0 : 1;
  if (::ioctl(fd, FIONBIO, &non_blocking) < 0) return {errno, std::system_category()};
  return {};
}

}  // namespace arpma::detail
