// The blocking flavour's executor: a private, per-thread io_context that the
// C API's channels are bound to (nothing ever runs it for them: the blocking
// calls wait on their fds in poll(2) or read(2) directly).
#pragma once

#include "core/asio.hpp"

namespace arpma::detail {

/// The calling thread's private loop.
asio::io_context& thread_loop();

}  // namespace arpma::detail
