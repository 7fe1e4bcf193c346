// Two connected arpma::streams on one io_context, for the stream tests: the
// provider the environment chooses, a small window so that the tests cross
// slot and credit boundaries often.
#pragma once

#include "arpma/stream.hpp"

#include "arpma/endpoint.hpp"
#include "arpma/peer.hpp"
#include "support/test_addr.hpp"
#include "support/transport.hpp"
#include "support/wait.hpp"

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>

namespace arpma::test {

// A small window, so that the tests cross slot and credit boundaries often.
inline arpma::stream_cfg small_cfg() {
  arpma::stream_cfg cfg;
  cfg.slots = 4;
  cfg.control_slots = 2;
  cfg.slot_size = 1024;
  return cfg;
}

class stream_pair : public ::testing::Test {
 protected:
  void SetUp() override {
    if (iwarp()) GTEST_SKIP() << iwarp_has_no_streams;
    auto dev = arpma::get_ibv_context(addr, arpma::ibv_context_type::local);
    ASSERT_TRUE(dev);
    peer.emplace(arpma::peer::create(dev.value()).value());
  }

  template <class Done>
  [[nodiscard]] bool run_until(Done done,
                               std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    return arpma::test::run_until(io, done, limit);
  }

  void connect(const arpma::stream_cfg& server_cfg = small_cfg(),
               const arpma::stream_cfg& client_cfg = small_cfg()) {
    auto ep = arpma::endpoint::listen(io.get_executor(), *peer, addr, "0");
    ASSERT_TRUE(ep);
    endpoint = std::move(ep).value();
    bool accepted = false;
    bool connected = false;
    arpma::async_accept_stream(endpoint, *peer, server_cfg,
                               [&](arpma::error_code ec, arpma::stream s) {
                                 EXPECT_FALSE(ec) << ec.message();
                                 server = std::move(s);
                                 accepted = true;
                               });
    arpma::async_connect_stream(io.get_executor(), *peer, addr, std::to_string(endpoint.port()),
                                client_cfg, [&](arpma::error_code ec, arpma::stream s) {
                                  EXPECT_FALSE(ec) << ec.message();
                                  client = std::move(s);
                                  connected = true;
                                });
    ASSERT_TRUE(run_until([&] { return accepted && connected; })) << "timed out";
    ASSERT_TRUE(server && client);
  }

  std::string addr = test_addr();
  std::optional<arpma::peer> peer;
  boost::asio::io_context io;
  arpma::endpoint endpoint;
  arpma::stream server;
  arpma::stream client;
};

}  // namespace arpma::test
