// Every asynchronous operation that can stay pending, table-driven (issue
// 15): closing the object it was started on completes it with
// operation_aborted and lets run() return; destroying the io_context
// instead destroys it uncalled and leaves every provider fd open (the
// provider owns them). Soft provider on loopback (verbs in the guest).
#include "arpma/connection.hpp"

#include "arpma/cq.hpp"
#include "arpma/endpoint.hpp"
#include "arpma/mr.hpp"
#include "arpma/peer.hpp"
#include "arpma/srq.hpp"
#include "core/conn_state.hpp"
#include "core/endpoint_state.hpp"
#include "support/connected_pair.hpp"

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include <fcntl.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

struct objects {
  std::unique_ptr<asio::io_context> io = std::make_unique<asio::io_context>();
  std::optional<arpma::peer> peer;
  arpma::endpoint endpoint;
  arpma::test::connected_pair pair;
  arpma::srq srq;
  std::vector<char> memory = std::vector<char>(4096);
  std::optional<arpma::local_mr> mr;

  // The provider's fds the pending operations watch.
  [[nodiscard]] std::vector<int> provider_fds() const {
    const auto* st = pair.client.state();
    return {st->prov().comp_channel_fd(st->cq.own_channel), st->channel->fd(),
            endpoint.state()->channel->fd(), srq.rcq_fd()};
  }
};

using done_fn = std::function<void(std::error_code)>;

struct pending_case {
  const char* name;
  std::function<void(objects&, done_fn)> start;
  std::function<void(objects&)> close;
};

void PrintTo(const pending_case& c, std::ostream* os) { *os << c.name; }

const std::vector<pending_case>& cases() {
  static const std::vector<pending_case> all = {
      {"connection_async_recv",
       [](objects& o, done_fn d) {
         o.pair.client.async_recv(*o.mr, 0, 64, [d](arpma::error_code ec, auto) { d(ec); });
       },
       [](objects& o) { (void)o.pair.client.close(); }},
      {"connection_async_next_event",
       [](objects& o, done_fn d) {
         o.pair.client.async_next_event([d](arpma::error_code ec, auto) { d(ec); });
       },
       [](objects& o) { (void)o.pair.client.close(); }},
      {"cq_async_wait",
       [](objects& o, done_fn d) {
         o.pair.client.completion_queue().async_wait([d](arpma::error_code ec) { d(ec); });
       },
       [](objects& o) { (void)o.pair.client.close(); }},
      {"srq_async_recv",
       [](objects& o, done_fn d) {
         o.srq.async_recv(*o.mr, 0, 64, [d](arpma::error_code ec, auto) { d(ec); });
       },
       [](objects& o) { (void)o.srq.close(); }},
      {"srq_cq_async_wait",
       [](objects& o, done_fn d) {
         o.srq.completion_queue().async_wait([d](arpma::error_code ec) { d(ec); });
       },
       [](objects& o) { (void)o.srq.close(); }},
      {"endpoint_async_next_conn_req",
       [](objects& o, done_fn d) {
         o.endpoint.async_next_conn_req({}, [d](arpma::error_code ec, auto) { d(ec); });
       },
       [](objects& o) { (void)o.endpoint.shutdown(); }},
  };
  return all;
}

class pending_ops : public ::testing::TestWithParam<pending_case> {
 protected:
  void SetUp() override {
    const auto addr = arpma::test::test_addr();
    auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::local);
    ASSERT_TRUE(dev) << dev.error().message();
    o.peer.emplace(arpma::peer::create(dev.value()).value());
    o.mr.emplace(
        arpma::local_mr::reg(*o.peer, o.memory.data(), o.memory.size(), arpma::mr_usage::recv)
            .value());
    auto ep = arpma::endpoint::listen(o.io->get_executor(), *o.peer, addr, "0");
    ASSERT_TRUE(ep) << ep.error().message();
    o.endpoint = std::move(ep).value();
    o.pair = arpma::test::connect_pair(*o.io, *o.peer, o.endpoint, {}, {});
    ASSERT_TRUE(o.pair.client && o.pair.server);
    auto s = arpma::srq::create(o.io->get_executor(), *o.peer, {});
    ASSERT_TRUE(s) << s.error().message();
    o.srq = std::move(s).value();
  }

  // Runs the loop long enough for the operation to be under way.
  void settle() {
    o.io->restart();
    o.io->run_for(20ms);
  }

  objects o;
};

TEST_P(pending_ops, closing_its_object_completes_it_aborted_and_run_returns) {
  std::optional<std::error_code> outcome;
  GetParam().start(o, [&](std::error_code ec) { outcome = ec; });
  settle();
  ASSERT_FALSE(outcome) << "not pending: " << outcome->message();
  GetParam().close(o);
  o.io->restart();
  o.io->run_for(5s);
  EXPECT_TRUE(o.io->stopped()) << "run() did not run out of work";
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(*outcome, std::errc::operation_canceled) << outcome->message();
}

TEST_P(pending_ops, a_destroyed_io_context_destroys_it_uncalled_and_leaves_the_fds) {
  bool called = false;
  GetParam().start(o, [&](std::error_code) { called = true; });
  settle();
  const auto fds = o.provider_fds();
  o.io.reset();
  EXPECT_FALSE(called);
  for (const int fd : fds) EXPECT_NE(::fcntl(fd, F_GETFD), -1) << "fd " << fd << " closed";
}

INSTANTIATE_TEST_SUITE_P(all, pending_ops, ::testing::ValuesIn(cases()),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
