// The soft provider's acknowledgement of a message its application is to
// answer: the progress thread that delivers the message leaves the ACK
// pending, and it goes out in front of the answer (one frame, one wake-up of
// the sender), at the application's next poll once the message is taken,
// when the application goes back to the channel with no event, or at the
// latest after limits::ack_delay. The ack delay is 20 s here unless a test
// says otherwise, so a send completion that arrives came by the path the
// test names.
#include "provider/soft/soft_provider.hpp"

#include "support/soft_pair.hpp"
#include "support/wait.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <thread>

namespace soft_link_ack_test {

namespace {

namespace prov = arpma::provider;
using namespace std::chrono_literals;
using arpma::test::cq_empty;
using arpma::test::next_wc;
using prov::wc_opcode;
using prov::wc_status;
using prov::wr_opcode;

constexpr std::uint32_t size = 8;
constexpr std::uint64_t ping_id = 1;
constexpr std::uint64_t answer_id = 2;
/// How long a test watches for a completion that must not come.
constexpr auto quiet = 100ms;

class soft_link_ack_test : public arpma::test::soft_pair {
 protected:
  void start(std::chrono::microseconds ack_delay = 20s) {
    prov::soft_provider::limits l;
    l.ack_delay = ack_delay;
    soft.set_limits(l);
    connect();
    a_mr_ = reg(a, a_buf_.data(), a_buf_.size());
    b_mr_ = reg(b, b_buf_.data(), b_buf_.size());
  }

  /// a's SEND reaches b's receive, and b's channel fires (b's receive CQ
  /// armed before): b's application is woken, not yet polling.
  void ping() {
    ASSERT_FALSE(recv(b, b_mr_, b_buf_.data(), size, 7));
    ASSERT_FALSE(soft.req_notify_cq(b.rcq, false));
    ASSERT_FALSE(post(a, wr_opcode::send, a_mr_, a_buf_.data(), size, 0, 0, ping_id));
    // As an event loop waits: the fd, then the event. The non-blocking
    // channel may be readable for the frame with its event not queued yet
    // (the progress thread took the frame first and is completing it:
    // docs/soft-provider.md, "The channel watches its links"); the event
    // then makes the fd readable again at once.
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    auto fired = soft.get_cq_event(b.cc);
    while (!fired && fired.error() == std::errc::resource_unavailable_try_again &&
           std::chrono::steady_clock::now() < deadline) {
      pollfd ready{soft.comp_channel_fd(b.cc), POLLIN, 0};
      (void)::poll(&ready, 1, 100);
      fired = soft.get_cq_event(b.cc);
    }
    ASSERT_TRUE(fired) << "b's channel never fired: " << fired.error().message();
    EXPECT_EQ(fired.value(), b.rcq);
  }

  /// b takes the message from its receive CQ (the CQ held it: no link moves).
  void take_message() { expect_wc(b.rcq, 7, wc_status::success, wc_opcode::recv); }

  /// Nothing acknowledged a's SEND for `quiet`.
  void expect_unacknowledged() {
    std::this_thread::sleep_for(quiet);
    EXPECT_TRUE(cq_empty(soft, a.cq)) << "a's SEND was acknowledged before b answered or polled";
  }

  std::array<std::uint8_t, 64> a_buf_{};
  std::array<std::uint8_t, 64> b_buf_{};
  prov::mr* a_mr_ = nullptr;
  prov::mr* b_mr_ = nullptr;
};

TEST_F(soft_link_ack_test, the_answer_carries_the_acknowledgement) {
  start();
  ASSERT_FALSE(recv(a, a_mr_, a_buf_.data() + 32, size, 9));
  ping();
  expect_unacknowledged();
  take_message();
  ASSERT_FALSE(post(b, wr_opcode::send, b_mr_, b_buf_.data() + 32, size, 0, 0, answer_id));
  expect_wc(a.cq, ping_id, wc_status::success, wc_opcode::send);
  expect_wc(a.rcq, 9, wc_status::success, wc_opcode::recv);
  // a answers nothing: its next poll acknowledges b's answer.
  EXPECT_TRUE(cq_empty(soft, a.rcq));
  expect_wc(b.cq, answer_id, wc_status::success, wc_opcode::send);
}

TEST_F(soft_link_ack_test, the_next_poll_after_the_message_is_taken_acknowledges_it) {
  start();
  ping();
  take_message();
  expect_unacknowledged();  // taking it moved no link
  EXPECT_TRUE(cq_empty(soft, b.rcq));
  expect_wc(a.cq, ping_id, wc_status::success, wc_opcode::send);
}

TEST_F(soft_link_ack_test, a_poll_of_another_cq_leaves_it_while_the_message_is_untaken) {
  start();
  ping();
  EXPECT_TRUE(cq_empty(soft, b.cq));  // b's send CQ: a poll that moves b's link
  expect_unacknowledged();
  take_message();
  EXPECT_TRUE(cq_empty(soft, b.cq));
  expect_wc(a.cq, ping_id, wc_status::success, wc_opcode::send);
}

TEST_F(soft_link_ack_test, a_reader_back_at_the_channel_with_no_event_acknowledges_it) {
  start();
  ping();
  take_message();
  const int fd = soft.comp_channel_fd(b.cc);
  ASSERT_EQ(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
  auto none = soft.get_cq_event(b.cc);  // as rpma_cq_wait before it sleeps
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error(), std::errc::resource_unavailable_try_again);
  expect_wc(a.cq, ping_id, wc_status::success, wc_opcode::send);
}

TEST_F(soft_link_ack_test, an_application_that_never_comes_back_is_acknowledged_within_the_delay) {
  start(1ms);
  ping();
  expect_wc(a.cq, ping_id, wc_status::success, wc_opcode::send);
}

}  // namespace

}  // namespace soft_link_ack_test
