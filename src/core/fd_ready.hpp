// File-descriptor modes the channels need: whether there is something to read
// now (drains read only what is there, whatever mode a C program set), and
// waiting for that on the loop, non-blocking; the fds the C API hands out keep
// the blocking mode the provider made them with, librpma's default.
#pragma once

#include "core/asio.hpp"
#include "core/op_slot.hpp"

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

/// Takes a provider's channel fd (blocking, as the provider makes it) into
/// the reactor and makes it non-blocking through the descriptor: the one
/// ioctl(FIONBIO) the fd costs, which Asio's first wait would make anyway
/// had it not been told, and after which a read needs no poll(2) first.
/// The provider keeps owning the fd. Throws as the descriptor's constructor
/// (the reactor cannot register it); a failed ioctl leaves it registered and
/// blocking, which callers treat as an fd to ask before each read.
inline std::error_code adopt_non_blocking(std::optional<asio::posix::stream_descriptor>& fd,
                                          const asio::any_io_executor& ex, int native_fd) {
  fd.emplace(ex, native_fd);
  boost::system::error_code ec;
  fd->non_blocking(true, ec);
  return ec;
}

/// Calls `on_ready(std::error_code)` on `ex` once `native_fd` is readable,
/// through an async_wait on `fd`, adopted on first use (adopt_non_blocking),
/// the wait's storage in `slot` (its owner's one wait on that fd).
/// An fd made readable while nobody watched is seen too, although the
/// reactor is edge-triggered: Asio's epoll reactor re-arms the descriptor
/// (EPOLL_CTL_MOD) for every wait queued on an idle descriptor, and the
/// kernel then reports an fd that is readable already. (No poll(2) first: it
/// cost one per operation.)
template <class Handler>
void when_readable(std::optional<asio::posix::stream_descriptor>& fd,
                   const asio::any_io_executor& ex, int native_fd, op_slot& slot,
                   Handler on_ready) {
  if (!fd) (void)adopt_non_blocking(fd, ex, native_fd);
  fd->async_wait(asio::posix::stream_descriptor::wait_read, in_slot(slot, std::move(on_ready)));
}

/// One ioctl(FIONBIO), not fcntl's F_GETFL and F_SETFL: every syscall of a
/// connection's setup counts against librpma's rate.
inline std::error_code set_fd_blocking(int fd, bool blocking) noexcept {
  int non_blocking = blocking ? 0 : 1;
  if (::ioctl(fd, FIONBIO, &non_blocking) < 0) return {errno, std::system_category()};
  return {};
}

}  // namespace arpma::detail
