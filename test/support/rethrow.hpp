// co_spawn's completion handler for tests: an exception thrown in a test coroutine leaves
// io_context::run() and fails the test, instead of vanishing with the coroutine.
#pragma once

#include <exception>

namespace arpma::test {

inline void rethrow(const std::exception_ptr& e) {
  if (e) std::rethrow_exception(e);
}

}  // namespace arpma::test
