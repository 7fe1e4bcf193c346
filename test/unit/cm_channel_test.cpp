// cm_channel's drain: a channel the loop watches is read until EAGAIN, with
// no poll(2) per event (one syscall less per event on every connection's
// setup), and a channel the C flavour made blocking is still asked first, so
// that draining it never blocks the loop.
#include "core/cm_channel.hpp"

#include "fake/fake_provider.hpp"
#include "support/open_fds.hpp"

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include <fcntl.h>

#include <chrono>
#include <future>
#include <memory>
#include <vector>

namespace cm_channel_test {

namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace prov = arpma::provider;
using arpma::detail::cm_channel;
using arpma::test::fake_provider;

struct recorder final : arpma::detail::cm_event_sink {
  std::vector<prov::cm_event_type> seen;
  void on_cm_event(const prov::cm_event& event) override { seen.push_back(event.type); }
};

class cm_channel_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto made = cm_channel::create(fake_, io_.get_executor());
    ASSERT_TRUE(made) << made.error().message();
    channel_ = std::move(made).value();
    token_ = channel_->reserve_token();
    auto id = fake_.create_id(channel_->native(), token_);
    ASSERT_TRUE(id) << id.error().message();
    id_ = id.value();
    channel_->attach(token_, &sink_);
  }
  void TearDown() override {
    channel_->detach(token_);
    channel_->shutdown();
    (void)fake_.destroy_id(id_);
  }
  // Runs the loop until `n` events have arrived (2 s at most).
  void run_until_seen(std::size_t n) {
    const auto until = std::chrono::steady_clock::now() + 2s;
    while (sink_.seen.size() < n && std::chrono::steady_clock::now() < until) {
      io_.restart();
      io_.run_for(10ms);
    }
  }

  fake_provider fake_;
  asio::io_context io_;
  std::shared_ptr<cm_channel> channel_;
  std::uint64_t token_ = 0;
  prov::cm_id* id_ = nullptr;
  recorder sink_;
};

TEST_F(cm_channel_test, a_channel_stays_blocking_as_made_until_watched) {
  // What the C flavour hands out: the provider's blocking fd, untouched.
  ASSERT_EQ(::fcntl(channel_->fd(), F_GETFL) & O_NONBLOCK, 0);
  ASSERT_FALSE(channel_->set_blocking(true));
  EXPECT_EQ(::fcntl(channel_->fd(), F_GETFL) & O_NONBLOCK, 0);
  // Made non-blocking and back by request, whatever this side knew of it.
  ASSERT_FALSE(channel_->set_blocking(false));
  EXPECT_NE(::fcntl(channel_->fd(), F_GETFL) & O_NONBLOCK, 0);
  ASSERT_FALSE(channel_->set_blocking(true));
  EXPECT_EQ(::fcntl(channel_->fd(), F_GETFL) & O_NONBLOCK, 0);
}

TEST_F(cm_channel_test, a_watched_channel_is_non_blocking_and_read_to_the_last_event) {
  ASSERT_EQ(::fcntl(channel_->fd(), F_GETFL) & O_NONBLOCK, 0) << "blocking until watched";
  channel_->hold();
  EXPECT_NE(::fcntl(channel_->fd(), F_GETFL) & O_NONBLOCK, 0);
  // Several events in one wake-up, then more in a later one: each drain
  // reads until the provider says EAGAIN, and nothing is lost between.
  fake_.deliver(id_, prov::cm_event_type::addr_resolved);
  fake_.deliver(id_, prov::cm_event_type::route_resolved);
  fake_.deliver(id_, prov::cm_event_type::established);
  run_until_seen(3);
  fake_.deliver(id_, prov::cm_event_type::disconnected);
  run_until_seen(4);
  channel_->release();
  EXPECT_EQ(sink_.seen,
            (std::vector{prov::cm_event_type::addr_resolved, prov::cm_event_type::route_resolved,
                         prov::cm_event_type::established, prov::cm_event_type::disconnected}));
}

TEST_F(cm_channel_test, draining_a_channel_made_blocking_never_blocks) {
  channel_->hold();
  ASSERT_FALSE(channel_->set_blocking(true));  // what the C flavour does to its fds
  ASSERT_EQ(::fcntl(channel_->fd(), F_GETFL) & O_NONBLOCK, 0);
  fake_.deliver(id_, prov::cm_event_type::established);
  // One event, then empty and blocking: a drain must ask the fd before each
  // read, not read it and wait. Off the loop's thread, so that a drain that
  // blocks fails the test instead of hanging it.
  auto drained = std::async(std::launch::async, [this] { channel_->drain(); });
  const bool returned = drained.wait_for(2s) == std::future_status::ready;
  if (!returned) {  // lets it go: the read it waits in ends, the next finds EAGAIN
    const int flags = ::fcntl(channel_->fd(), F_GETFL);
    EXPECT_EQ(::fcntl(channel_->fd(), F_SETFL, flags | O_NONBLOCK), 0);
    fake_.deliver(id_, prov::cm_event_type::disconnected);
  }
  drained.wait();
  EXPECT_TRUE(returned) << "drain blocked on an empty blocking channel";
  run_until_seen(1);
  EXPECT_EQ(sink_.seen, std::vector{prov::cm_event_type::established});
  channel_->release();
}

TEST_F(cm_channel_test, an_unheld_channel_keeps_no_run_going_and_the_next_hold_reads_what_came) {
  channel_->hold();
  fake_.deliver(id_, prov::cm_event_type::established);
  run_until_seen(1);
  channel_->release();
  // The descriptor stays registered (a hold costs one re-arm, not a
  // registration), yet nothing waits on it: run() runs out of work.
  io_.restart();
  io_.run_for(2s);
  EXPECT_TRUE(io_.stopped()) << "an unheld channel kept the loop running";
  EXPECT_EQ(arpma::test::epoll_masks_of(channel_->fd()).size(), 1U)
      << "the reactor let go of the channel's fd";
  // An event while nobody holds stays in the channel, undelivered...
  fake_.deliver(id_, prov::cm_event_type::disconnected);
  io_.restart();
  io_.poll();
  EXPECT_EQ(sink_.seen.size(), 1U);
  // ...and the next hold's wait finds the fd readable already, though the
  // reactor is edge-triggered and the edge came while nothing waited.
  channel_->hold();
  run_until_seen(2);
  channel_->release();
  EXPECT_EQ(sink_.seen,
            (std::vector{prov::cm_event_type::established, prov::cm_event_type::disconnected}));
}

}  // namespace

}  // namespace cm_channel_test
