// Where the two-sided tests connect: loopback on the host, the guest's rxe
// address inside the Soft-RoCE guest (ARPMA_TEST_ADDR), the other node's for a
// peer process there (ARPMA_TEST_PEER_ADDR), and a port that nothing listens on.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <cstdlib>
#include <string>

namespace arpma::test {

/// ARPMA_TEST_ADDR (the guest's rxe address) or loopback.
inline std::string test_addr() {
  const char* env = std::getenv("ARPMA_TEST_ADDR");  // NOLINT(concurrency-mt-unsafe)
  return env != nullptr && *env != '\0' ? env : "127.0.0.1";
}

/// Where the other process of a two-process test is: ARPMA_TEST_PEER_ADDR (another node's
/// address, test/vm/two-nodes-suite.sh), else test_addr().
inline std::string peer_addr() {
  const char* env = std::getenv("ARPMA_TEST_PEER_ADDR");  // NOLINT(concurrency-mt-unsafe)
  return env != nullptr && *env != '\0' ? env : test_addr();
}

/// A port on `addr` that was free a moment ago (the kernel's pick for port 0), as text for
/// rpma_ep_listen.
inline std::string free_port(const std::string& addr) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor probe(
      io, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address(addr), 0));
  return std::to_string(probe.local_endpoint().port());
}

}  // namespace arpma::test
