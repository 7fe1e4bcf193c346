// Atomic log example, co_await flavour: the client appends 3 records to the
// log in the server's memory (layout: see server.cpp). It reads the tail
// once; then, for each record: write it at the tail, flush it (so it is in
// the server's memory before the tail points past it), atomically write the
// new tail (8 bytes as one unit: a reader never sees half an offset), flush
// that. A reader following the tail never finds a record that is not fully
// there.
//
// usage: atomic_log_coroutine_client <addr> <port>

#include "../../common.hpp"

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace asio = boost::asio;
constexpr const char* who = "client";
constexpr int records = 3;

namespace {

asio::awaitable<bool> run_client(const arpma::peer& peer, const example::args& a) {
  example::deadline dl(co_await asio::this_coro::executor);
  // [0, 8): the tail as read; each record from offset 64 * i.
  std::array<char, 64 * (records + 1)> buf{};
  const arpma::local_mr mr = example::reg(who, peer, buf.data(), buf.size(),
                                          arpma::mr_usage::read_dst | arpma::mr_usage::write_src);
  if (!mr) co_return false;

  std::printf("client: connecting to %s:%s\n", a.addr.c_str(), a.port.c_str());
  arpma::connection conn = co_await example::connect(who, peer, a);
  if (!conn) co_return false;
  const auto log = example::server_region(who, conn);
  if (!log) co_return false;

  // Slices are checked when made: the log's first 8 bytes hold its tail.
  const auto tail_slot = arpma::buffer(*log, 0, 8);
  if (!tail_slot) {
    std::printf("client: the log is too small to hold its tail\n");
    co_return false;
  }
  const arpma::local_buffer tail_copy = arpma::buffer(mr, 0, 8).value();  // inside buf
  if (!co_await example::step(who, "reading the tail", dl, [&](auto token) {
        return conn.async_read(tail_copy, tail_slot.value(), token);
      }))
    co_return false;
  std::uint64_t tail = 0;
  std::memcpy(&tail, buf.data(), sizeof tail);  // little-endian hosts, as librpma's examples
  std::printf("client: the log's tail is at offset %llu\n", static_cast<unsigned long long>(tail));

  for (int i = 1; i <= records; ++i) {
    char* record = &buf[64 * static_cast<std::size_t>(i)];
    const int n = std::snprintf(record, 64, "record %d of %d", i, records);
    const std::size_t len = static_cast<std::size_t>(n) + 1;  // with its NUL
    const auto slot = arpma::buffer(*log, tail, len);         // the tail is the server's word
    if (!slot) {
      std::printf("client: the log is full\n");
      co_return false;
    }
    const auto source = arpma::buffer(mr, 64 * static_cast<std::size_t>(i), len).value();
    if (!co_await example::step(who, "writing the record", dl, [&](auto token) {
          return conn.async_write(slot.value(), source, token);
        }))
      co_return false;
    if (!co_await example::step(who, "flushing the record", dl, [&](auto token) {
          return conn.async_flush(slot.value(), arpma::flush_type::visibility, token);
        }))
      co_return false;

    const std::uint64_t new_tail = tail + len;
    std::array<char, 8> value{};
    std::memcpy(value.data(), &new_tail, sizeof new_tail);
    if (!co_await example::step(who, "writing the tail", dl, [&](auto token) {
          return conn.async_atomic_write(tail_slot.value(), value, token);
        }))
      co_return false;
    if (!co_await example::step(who, "flushing the tail", dl, [&](auto token) {
          return conn.async_flush(tail_slot.value(), arpma::flush_type::visibility, token);
        }))
      co_return false;
    std::printf("client: appended \"%s\" at offset %llu, tail advanced to %llu\n", record,
                static_cast<unsigned long long>(tail), static_cast<unsigned long long>(new_tail));
    tail = new_tail;
  }
  co_return co_await example::disconnect(who, conn);
}

}  // namespace

int main(int argc, char* argv[]) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line visible at once, also in a pipe
  const example::args a = example::parse_args(argc, argv, false);
  auto peer = example::make_peer(who, a.addr, arpma::ibv_context_type::remote);
  if (!peer) return EXIT_FAILURE;
  asio::io_context io;
  return example::run(who, io, run_client(*peer, a));
}
