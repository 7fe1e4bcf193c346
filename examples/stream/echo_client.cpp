// Stream example: a line echo client. Sends lines of growing length (the
// longest spans many of the stream's slots), checks that each comes back
// intact, then shuts its side down and waits for the server's end of stream.
//
// usage: stream_echo_client <addr> <port> [--tcp]

#include "common.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

namespace asio = boost::asio;

namespace {

constexpr int line_count = 100;

std::string line_of(int i) {
  std::string line(static_cast<std::size_t>(i) * i * 3 + 1, ' ');  // up to ~29 KiB
  for (std::size_t k = 0; k < line.size(); ++k) line[k] = static_cast<char>('a' + (i + k) % 26);
  return line + '\n';
}

template <class Stream>
asio::awaitable<void> talk(Stream s) {
  std::string got;
  for (int i = 0; i < line_count; ++i) {
    const std::string line = line_of(i);
    co_await asio::async_write(s, asio::buffer(line), asio::use_awaitable);
    const auto n =
        co_await asio::async_read_until(s, asio::dynamic_buffer(got), '\n', asio::use_awaitable);
    if (got.compare(0, n, line) != 0) throw std::runtime_error("line " + std::to_string(i));
    got.erase(0, n);
  }
  example::end_sending(s);
  char c = 0;
  auto [ec, n] =
      co_await asio::async_read(s, asio::buffer(&c, 1), asio::as_tuple(asio::use_awaitable));
  if (ec != asio::error::eof)
    throw std::runtime_error("expected the server's eof: " + ec.message());
  std::printf("client: %d lines echoed intact, then end of stream\n", line_count);
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
          io, [&]() -> asio::awaitable<void> { co_await talk(co_await example::connect_tcp(a)); },
          done);
      io.run_for(std::chrono::seconds(20));
    } else {
      auto p = example::make_peer(a.addr);
      asio::co_spawn(
          io,
          [&]() -> asio::awaitable<void> { co_await talk(co_await example::connect_rdma(a, p)); },
          done);
      io.run_for(std::chrono::seconds(20));
    }
  } catch (const std::exception& ex) {
    std::printf("client: failed: %s\n", ex.what());
  }
  return rc;
}
