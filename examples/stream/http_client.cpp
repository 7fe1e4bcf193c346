// Stream example: an HTTP/1.1 client with Boost.Beast, the same template
// over arpma::stream or (--tcp) asio::ip::tcp::socket. Sends a few
// keep-alive GETs, checks each answer, and closes with "Connection: close".
//
// usage: stream_http_client <addr> <port> [--tcp]

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

constexpr int request_count = 5;

template <class Stream>
asio::awaitable<void> get_pages(Stream s, const std::string& host) {
  boost::beast::flat_buffer buffer;
  for (int i = 0; i < request_count; ++i) {
    const std::string target = "/page/" + std::to_string(i);
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, host);
    req.keep_alive(i + 1 < request_count);
    co_await http::async_write(s, req, asio::use_awaitable);
    http::response<http::string_body> res;
    co_await http::async_read(s, buffer, res, asio::use_awaitable);
    if (res.result() != http::status::ok || res.body() != "you asked for " + target + "\n")
      throw std::runtime_error("unexpected answer to " + target);
    std::printf("client: GET %s -> %u, \"%s\"\n", target.c_str(), res.result_int(),
                res.body().substr(0, res.body().size() - 1).c_str());
  }
  example::end_sending(s);
  std::printf("client: %d requests answered\n", request_count);
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
      std::printf("client: failed: %s\n", ex.what());
    }
  };
  try {
    if (a.tcp) {
      asio::co_spawn(
          io,
          [&]() -> asio::awaitable<void> {
            co_await get_pages(co_await example::connect_tcp(a), a.addr);
          },
          done);
      io.run_for(std::chrono::seconds(20));
    } else {
      auto p = example::make_peer(a.addr);
      asio::co_spawn(
          io,
          [&]() -> asio::awaitable<void> {
            co_await get_pages(co_await example::connect_rdma(a, p), a.addr);
          },
          done);
      io.run_for(std::chrono::seconds(20));
    }
  } catch (const std::exception& ex) {
    std::printf("client: failed: %s\n", ex.what());
  }
  return rc;
}
