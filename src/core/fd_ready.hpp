// Whether an fd has something to read now, without blocking: the channels'
// drains read only what is there, whatever blocking mode a C program set.
#pragma once

#include <poll.h>

namespace arpma::detail {

[[nodiscard]] inline bool readable(int fd) noexcept {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
}

}  // namespace arpma::detail
