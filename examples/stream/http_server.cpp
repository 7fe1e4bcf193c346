// Stream example: an HTTP/1.1 server with Boost.Beast. The handler is a
// template over the stream type: arpma::stream (RDMA) or, with --tcp,
// asio::ip::tcp::socket; nothing else changes. Serves one client's
// keep-alive requests until it closes.
//
// usage: stream_http_server <addr> <port> [--tcp]   (port 0: any free port)

#include "common.hpp"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <cstdio>
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

}  // namespace

int main(int argc, char* argv[]) {
  return example::server_main(argc, argv, [](auto s) { return serve_http(std::move(s)); });
}
