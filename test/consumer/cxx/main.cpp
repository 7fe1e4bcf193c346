// A consumer of the installed package (find_package(arpma), arpma::arpma): the device,
// a peer and a connection request on 127.0.0.1 (soft provider on loopback; nothing
// listens, a request only resolves and creates its QP), blocking and asynchronous.
#include <arpma/conn_req.hpp>
#include <arpma/error.hpp>
#include <arpma/peer.hpp>

#include <boost/asio/io_context.hpp>

#include <cstdio>

int main() {
  auto context = arpma::get_ibv_context("127.0.0.1", arpma::ibv_context_type::remote);
  if (!context) {
    std::printf("get_ibv_context: %s\n", context.error().message().c_str());
    return 1;
  }
  auto peer = arpma::peer::create(context.value());
  if (!peer) {
    std::printf("peer::create: %s\n", peer.error().message().c_str());
    return 1;
  }

  auto req = arpma::conn_req_new(peer.value(), "127.0.0.1", "7204");
  if (!req) {
    std::printf("conn_req_new: %s\n", req.error().message().c_str());
    return 1;
  }
  std::printf("conn_req_new: QP %u\n", static_cast<unsigned>(req.value().qp_num()));

  boost::asio::io_context io;
  int rc = 1;
  arpma::async_conn_req_new(io.get_executor(), peer.value(), "127.0.0.1", "7204", arpma::conn_cfg{},
                            [&rc](arpma::error_code ec, arpma::conn_req r) {
                              if (ec) {
                                std::printf("async_conn_req_new: %s\n", ec.message().c_str());
                                return;
                              }
                              std::printf("async_conn_req_new: QP %u\n",
                                          static_cast<unsigned>(r.qp_num()));
                              rc = 0;
                            });
  io.run();
  return rc;
}
