// Stream example: a line echo server. Accepts one client, sends every line
// back as it came (asio::async_read_until / asio::async_write, the same code
// over RDMA or TCP), and ends when the client shuts its side down.
//
// usage: stream_echo_server <addr> <port> [--tcp]   (port 0: any free port)

#include "common.hpp"

#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>

#include <cstdio>
#include <string>

namespace asio = boost::asio;

namespace {

template <class Stream>
asio::awaitable<int> echo(Stream s) {
  std::string pending;
  int lines = 0;
  for (;;) {
    auto [ec, n] = co_await asio::async_read_until(s, asio::dynamic_buffer(pending), '\n',
                                                   asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::eof) break;
    if (ec) throw std::system_error(ec, "reading a line");
    co_await asio::async_write(s, asio::buffer(pending.data(), n), asio::use_awaitable);
    pending.erase(0, n);
    ++lines;
  }
  example::end_sending(s);
  std::printf("server: echoed %d lines, client done\n", lines);
  co_return lines;
}

}  // namespace

int main(int argc, char* argv[]) {
  return example::server_main(argc, argv, [](auto s) { return echo(std::move(s)); });
}
