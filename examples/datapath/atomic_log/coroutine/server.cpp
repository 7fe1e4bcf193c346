// Atomic log example, co_await flavour: the server. Its region holds a log:
// at offset 0 the tail (a little-endian 8-byte offset: where the next record
// goes), records (NUL-terminated text) from offset 64. It starts empty (tail
// 64), sends the region's descriptor in the accept's private data, and once
// the client has disconnected prints the log: every record up to the tail.
//
// usage: atomic_log_coroutine_server <addr> <port>

#include "../../common.hpp"

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace asio = boost::asio;
constexpr const char* who = "server";
constexpr std::uint64_t log_start = 64;

struct alignas(64) log_region {
  std::array<char, 4096> bytes{};
};

namespace {

// Prints the records in [log_start, tail); false when the tail is corrupt.
bool print_log(const std::array<char, 4096>& memory) {
  std::uint64_t tail = 0;
  std::memcpy(&tail, memory.data(), sizeof tail);  // little-endian hosts, as librpma's examples
  if (tail < log_start || tail > memory.size()) {
    std::printf("server: the tail (%llu) is outside the log\n",
                static_cast<unsigned long long>(tail));
    return false;
  }
  int records = 0;
  for (std::uint64_t at = log_start; at < tail; ++records) {
    const std::string record = example::text_at(&memory[at], tail - at);
    std::printf("server: record at offset %llu: \"%s\"\n", static_cast<unsigned long long>(at),
                record.c_str());
    at += record.size() + 1;
  }
  std::printf("server: the log holds %d records, tail at offset %llu\n", records,
              static_cast<unsigned long long>(tail));
  return records > 0;
}

asio::awaitable<bool> serve(const arpma::peer& peer, arpma::endpoint& ep) {
  // The tail's address must be 8-byte aligned (the atomic write's target),
  // not only its offset. On the heap, not in the coroutine's frame: g++ 12
  // ignores alignas there (GCC PR 104177).
  const auto region = std::make_unique<log_region>();
  std::array<char, 4096>& memory = region->bytes;
  std::memcpy(memory.data(), &log_start, sizeof log_start);  // an empty log
  const arpma::local_mr mr = example::reg(who, peer, memory.data(), memory.size(),
                                          arpma::mr_usage::read_src | arpma::mr_usage::write_dst |
                                              arpma::mr_usage::flush_type_visibility);
  bool ok = false;
  if (mr) {
    std::printf("server: an empty log, tail at offset %llu\n",
                static_cast<unsigned long long>(log_start));
    arpma::connection conn = co_await example::accept_next(who, ep, mr.descriptor());
    // Not `conn && co_await ...`: g++ 12 runs the co_await in
    // `conn && co_await f() && g()` even when conn is false.
    if (conn) ok = co_await example::wait_closed(who, conn);
    if (ok) ok = print_log(memory);
  }
  (void)ep.shutdown();  // a listening endpoint keeps the loop running
  co_return ok;
}

}  // namespace

int main(int argc, char* argv[]) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line visible at once, also in a pipe
  const example::args a = example::parse_args(argc, argv, false);
  auto peer = example::make_peer(who, a.addr, arpma::ibv_context_type::local);
  if (!peer) return EXIT_FAILURE;
  asio::io_context io;
  auto ep = example::listen(who, io, *peer, a);
  if (!ep) return EXIT_FAILURE;
  return example::run(who, io, serve(*peer, *ep));
}
