// Stream example: an HTTP/1.1 server with Boost.Beast. The handler is a
// template over the stream type: arpma::stream (RDMA) or, with --tcp,
// asio::ip::tcp::socket; nothing else changes. Serves one client's
// keep-alive requests until it closes.
//
// usage: stream_http_server <addr> <port> [--tcp]   (port 0: any free port)

#include "common.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

namespace asio = boost::asio;
namespace http = boost::beast::http;

namespace {

template <class Stream>
asio::awaitable<void> serve_http(Stream s) {
  boost::beast::flat_buffer buffer;
  int served = 0;
  for (;;) {
    http::request<http::string_body> req;
    auto [ec, n] = co_await http::async_read(s, buffer, req, asio::as_tuple(asio::use_awaitable));
    if (ec == http::error::end_of_stream) break;
    if (ec) throw std::system_error(ec, "reading a request");
    http::response<http::string_body> res{http::status::ok, req.version()};
    res.set(http::field::server, "arpma stream example");
    res.set(http::field::content_type, "text/plain");
    res.body() = "you asked for " + std::string(req.target()) + "\n";
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    co_await http::async_write(s, res, asio::use_awaitable);
    ++served;
    if (!res.keep_alive()) break;
  }
  example::end_sending(s);
  std::printf("server: served %d requests\n", served);
}

template <class Listener>
asio::awaitable<void> serve(Listener& l) {
  co_await serve_http(co_await l.accept());
}

}  // namespace

int main(int argc, char* argv[]) {
  const auto a = example::parse_args(argc, argv);
  asio::io_context io;
  int rc = 1;
  auto done = [&](const std::exception_ptr& e) {
    try {
      if (e) std::rethrow_exception(e);
      rc = 0;
    } catch (const std::exception& ex) {
      std::printf("server: failed: %s\n", ex.what());
    }
  };
  try {
    if (a.tcp) {
      example::tcp_listener l(io.get_executor(), a);
      asio::co_spawn(io, serve(l), done);
      io.run_for(std::chrono::seconds(20));
    } else {
      example::rdma_listener l(io.get_executor(), a);
      asio::co_spawn(io, serve(l), done);
      io.run_for(std::chrono::seconds(20));
    }
  } catch (const std::exception& ex) {
    std::printf("server: cannot listen: %s\n", ex.what());
  }
  return rc;
}
