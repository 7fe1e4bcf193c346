// The soft provider's frame buffer cache: a frame the progress thread wrote
// for the application's thread comes back to the application's thread, so a
// post allocates nothing once warm even when the socket did not take its
// frame at once (the stream_alloc test's flake: the application's cache ran
// dry while the progress thread's overflowed, and the overflow was freed).
#include "provider/soft/soft_wire.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace soft_wire_frame_cache_test {

namespace {

using arpma::provider::soft_wire::frame;
using arpma::provider::soft_wire::frame_cache;

/// Runs `f` on a thread of its own: a thread whose own cache starts empty.
template <class F>
void on_fresh_thread(F&& f) {
  std::thread t(std::forward<F>(f));
  t.join();
}

/// Empties the shared pool (whatever tests before this one left there).
void drain_shared() {
  on_fresh_thread([] {
    std::vector<frame> held;
    while (frame_cache::shared_frames() > 0) held.push_back(frame_cache::take(64));
  });
}

TEST(soft_wire_frame_cache, a_thread_takes_back_the_buffer_it_gave_back) {
  on_fresh_thread([] {
    frame f = frame_cache::take(64);
    const std::uint8_t* const buffer = f.data();
    frame_cache::give_back(std::move(f));
    const frame again = frame_cache::take(32);
    EXPECT_EQ(again.data(), buffer);
    EXPECT_EQ(again.size(), 32U);
  });
}

TEST(soft_wire_frame_cache, what_overflows_a_thread_reaches_another_thread) {
  drain_shared();
  constexpr std::size_t extra = 3;
  std::vector<const std::uint8_t*> overflow;
  on_fresh_thread([&] {
    std::vector<frame> built;
    for (std::size_t i = 0; i < frame_cache::max_frames + extra; ++i)
      built.push_back(frame_cache::take(64));
    for (std::size_t i = 0; i < built.size(); ++i) {
      if (i >= frame_cache::max_frames) overflow.push_back(built[i].data());
      frame_cache::give_back(std::move(built[i]));
    }
  });
  ASSERT_EQ(frame_cache::shared_frames(), extra);
  on_fresh_thread([&] {
    for (std::size_t i = 0; i < extra; ++i) {
      const frame f = frame_cache::take(64);
      EXPECT_NE(std::find(overflow.begin(), overflow.end(), f.data()), overflow.end());
    }
  });
  EXPECT_EQ(frame_cache::shared_frames(), 0U);
}

TEST(soft_wire_frame_cache, the_shared_pool_is_bounded) {
  drain_shared();
  on_fresh_thread([] {
    std::vector<frame> built;
    for (std::size_t i = 0; i < frame_cache::max_frames + frame_cache::max_shared + 5; ++i)
      built.push_back(frame_cache::take(64));
    for (frame& f : built) frame_cache::give_back(std::move(f));
  });
  EXPECT_EQ(frame_cache::shared_frames(), frame_cache::max_shared);
  drain_shared();
}

TEST(soft_wire_frame_cache, a_large_buffer_is_not_kept) {
  drain_shared();
  on_fresh_thread([] {
    std::vector<frame> built;
    for (std::size_t i = 0; i < frame_cache::max_frames; ++i)
      built.push_back(frame_cache::take(64));
    for (frame& f : built) frame_cache::give_back(std::move(f));
    frame_cache::give_back(frame(frame_cache::max_bytes + 1));
  });
  EXPECT_EQ(frame_cache::shared_frames(), 0U);
}

}  // namespace

}  // namespace soft_wire_frame_cache_test
