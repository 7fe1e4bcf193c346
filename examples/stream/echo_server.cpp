// Stream example: a line echo server. Accepts one client, sends every line
// back as it came (asio::async_read_until / asio::async_write, the same code
// over RDMA or TCP), and ends when the client shuts its side down.
//
// usage: stream_echo_server <addr> <port> [--tcp]   (port 0: any free port)

#include "common.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
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

template <class Listener>
asio::awaitable<void> serve(Listener& l) {
  co_await echo(co_await l.accept());
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
