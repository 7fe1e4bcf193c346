// The blocking flavour: run a private, per-thread event loop until one
// asynchronous operation completes. Used by the C API and sync C++ calls.
#pragma once

#include "arpma/error.hpp"
#include "arpma/result.hpp"
#include "core/asio.hpp"

#include <optional>
#include <utility>

namespace arpma::detail {

/// The calling thread's private loop; nothing else ever runs on it.
asio::io_context& thread_loop();

/// Starts `initiate(executor, handler)` and runs the loop until the handler
/// (signature `void(std::error_code, T)`) has been called and every
/// follow-up (cancelled timers, released descriptors) has run.
template <class T, class Initiate>
result<T> sync_wait(Initiate&& initiate) {
  auto& loop = thread_loop();
  std::optional<result<T>> out;
  std::forward<Initiate>(initiate)(loop.get_executor(), [&out](std::error_code ec, T value) {
    if (ec)
      out.emplace(ec);
    else
      out.emplace(std::move(value));
  });
  loop.restart();
  loop.run();
  if (!out) return make_error_code(errc::unknown);
  return std::move(*out);
}

}  // namespace arpma::detail
