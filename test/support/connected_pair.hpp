// What the C++ integration tests built on one io_context share: the address
// to test on, running the loop until a condition holds (support/wait.hpp),
// and a connection pair made through an endpoint with a cfg for each side.
#pragma once

#include "arpma/conn_cfg.hpp"
#include "arpma/conn_req.hpp"
#include "arpma/connection.hpp"
#include "arpma/endpoint.hpp"
#include "arpma/peer.hpp"
#include "support/test_addr.hpp"
#include "support/wait.hpp"

#include <gtest/gtest.h>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <system_error>

namespace arpma::test {

struct connected_pair {
  arpma::connection server;
  arpma::connection client;
};

/// One connection from `peer` to `ep` (on `io`), each side with its cfg;
/// failures are test failures (the pair is then partly empty). With
/// `client_ex`, the client connects on it (a strand: its executor).
inline connected_pair connect_pair(boost::asio::io_context& io, const arpma::peer& peer,
                                   arpma::endpoint& ep, const arpma::conn_cfg& server_cfg,
                                   const arpma::conn_cfg& client_cfg,
                                   const boost::asio::any_io_executor& client_ex = {}) {
  connected_pair out;
  bool accepted = false;
  bool connected = false;
  ep.async_next_conn_req(server_cfg, [&](std::error_code ec, arpma::conn_req in) {
    if (ec) {
      ADD_FAILURE() << "next_conn_req: " << ec.message();
      accepted = true;
      return;
    }
    in.async_connect({}, [&](std::error_code ec2, arpma::connection c) {
      EXPECT_FALSE(ec2) << ec2.message();
      out.server = std::move(c);
      accepted = true;
    });
  });
  arpma::async_conn_req_new(io.get_executor(), peer, test_addr(), std::to_string(ep.port()),
                            client_cfg, [&](std::error_code ec, arpma::conn_req req) {
                              if (ec) {
                                ADD_FAILURE() << "conn_req_new: " << ec.message();
                                connected = true;
                                return;
                              }
                              auto kept = std::make_shared<arpma::conn_req>(std::move(req));
                              auto done = [&, kept](std::error_code ec2, arpma::connection c) {
                                EXPECT_FALSE(ec2) << ec2.message();
                                out.client = std::move(c);
                                connected = true;
                              };
                              if (client_ex)
                                kept->async_connect({},
                                                    boost::asio::bind_executor(client_ex, done));
                              else
                                kept->async_connect({}, done);
                            });
  EXPECT_TRUE(run_until(io, [&] { return accepted && connected; })) << "connect timed out";
  return out;
}

}  // namespace arpma::test
