// Stream example: a line echo client. Sends lines of growing length (the
// longest spans many of the stream's slots), checks that each comes back
// intact, then shuts its side down and waits for the server's end of stream.
//
// usage: stream_echo_client <addr> <port> [--tcp]

#include "common.hpp"

#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>

#include <cstdio>
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
  return example::client_main(argc, argv,
                              [](auto s, const example::args&) { return talk(std::move(s)); });
}
