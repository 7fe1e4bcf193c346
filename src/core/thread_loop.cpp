#include "core/thread_loop.hpp"

namespace arpma::detail {

asio::io_context& thread_loop() {
  thread_local asio::io_context loop(1);
  return loop;
}

}  // namespace arpma::detail
