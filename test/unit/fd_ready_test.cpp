// when_readable without a poll(2) first: an fd made readable while nobody
// watched is still seen by the next wait (Asio's epoll reactor re-arms the
// edge-triggered descriptor for every wait; the kernel reports what is ready
// then). The data path relies on it, once per operation.
#include "core/fd_ready.hpp"

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>

namespace fd_ready_test {

namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;

class fd_ready_test : public ::testing::Test {
 protected:
  void TearDown() override {
    if (fd_) fd_->release();  // the test's eventfd, closed below
    ::close(efd_);
  }

  void signal() const {
    const std::uint64_t one = 1;
    ASSERT_EQ(::write(efd_, &one, sizeof one), static_cast<ssize_t>(sizeof one));
  }
  void consume() const {
    std::uint64_t value = 0;
    ASSERT_EQ(::read(efd_, &value, sizeof value), static_cast<ssize_t>(sizeof value));
  }
  // Whether a wait started now completes within `limit`.
  bool wait_completes(std::chrono::milliseconds limit) {
    bool ready = false;
    arpma::detail::when_readable(fd_, io_.get_executor(), efd_, slot_,
                                 [&](const std::error_code& ec) {
                                   EXPECT_FALSE(ec) << ec.message();
                                   ready = true;
                                 });
    io_.restart();
    io_.run_for(limit);
    return ready;
  }

  asio::io_context io_;
  int efd_ = ::eventfd(0, EFD_NONBLOCK);
  arpma::detail::op_slot slot_;  // outlives fd_'s wait
  std::optional<asio::posix::stream_descriptor> fd_;
};

TEST_F(fd_ready_test, an_fd_readable_before_its_first_wait_is_seen) {
  signal();
  EXPECT_TRUE(wait_completes(2s));
}

TEST_F(fd_ready_test, an_fd_made_readable_between_waits_is_seen) {
  signal();
  ASSERT_TRUE(wait_completes(2s));
  consume();
  // Readable again while no wait is queued, with the reactor running (a
  // timer keeps the loop in epoll_wait): it sees the edge, finds no wait for
  // it, and the edge is gone when the next wait starts.
  asio::steady_timer signaller(io_, 10ms);
  signaller.async_wait([this](const std::error_code&) { signal(); });
  asio::steady_timer later(io_, 60ms);
  later.async_wait([](const std::error_code&) {});
  io_.restart();
  io_.run();
  EXPECT_TRUE(wait_completes(2s));
}

TEST_F(fd_ready_test, an_fd_still_readable_after_a_wait_completes_wakes_the_next) {
  signal();
  ASSERT_TRUE(wait_completes(2s));
  // Not consumed (a second event left in the channel): the next wait
  // completes at once.
  EXPECT_TRUE(wait_completes(2s));
}

}  // namespace

}  // namespace fd_ready_test
