// Stream example: an HTTP/1.1 client with Boost.Beast, the same template
// over arpma::stream or (--tcp) asio::ip::tcp::socket. Sends a few
// keep-alive GETs, checks each answer, and closes with "Connection: close".
//
// usage: stream_http_client <addr> <port> [--tcp]

#include "common.hpp"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <cstdio>
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
  return example::client_main(
      argc, argv, [](auto s, const example::args& a) { return get_pages(std::move(s), a.addr); });
}
