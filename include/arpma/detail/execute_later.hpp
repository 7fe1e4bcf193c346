// Running a completion on an executor, never inside the function that asks:
// how arpma completes an operation that failed before it began.
#pragma once

#include <boost/asio/execution/blocking.hpp>
#include <boost/asio/execution/relationship.hpp>
#include <boost/asio/prefer.hpp>

#include <utility>

namespace arpma::detail {

/// Runs `f` on `ex` later, as asio::post would, but for any executor: an
/// erased handler's executor (any_completion_executor) only *prefers*
/// blocking.never, where post requires it. Every executor Asio ships honours
/// the preference.
template <class Executor, class Function>
void execute_later(const Executor& ex, Function&& f) {
  namespace execution = boost::asio::execution;
  boost::asio::prefer(ex, execution::blocking_t::never, execution::relationship_t::fork)
      .execute(std::forward<Function>(f));
}

}  // namespace arpma::detail
