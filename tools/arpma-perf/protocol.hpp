// What a client tells the server in its connect request's private data (the server answers
// with its region's descriptor in the accept's): which operation comes, so the server knows
// whether to post receives and echo, and which run the connection belongs to, so the server
// can count runs (--once, --clients) rather than connections.
#pragma once

#include "args.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace arpma_perf {

struct hello {
  op_kind op = op_kind::write;
  test_kind test = test_kind::lat;
  poll_mode mode = poll_mode::coroutine;
  std::uint32_t max_size = 0;  ///< the largest message of the run
  std::uint32_t qd = 1;        ///< operations in flight per connection
  std::uint32_t conns = 1;     ///< connections of the run
  std::uint64_t run_id = 0;    ///< the same for every connection of one run
};

/// rdma_cm carries 56 bytes with a connect request; this stays well below.
inline constexpr std::size_t hello_size = 28;

[[nodiscard]] std::array<std::uint8_t, hello_size> encode(const hello& h);
/// The hello in `data` (which may be padded beyond hello_size); empty when it is none, or
/// asks for what the server would not do (a size or depth beyond the limits).
[[nodiscard]] std::optional<hello> decode(std::span<const std::uint8_t> data);

}  // namespace arpma_perf
