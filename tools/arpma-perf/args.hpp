// arpma-perf's command line: what the user asked for, checked before anything runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace arpma_perf {

enum class role { server, client };
enum class test_kind { lat, bw };
enum class op_kind { write, read, send, atomic_write, flush };
enum class poll_mode { coroutine, busy_poll };
enum class provider_choice { auto_detect, soft, verbs };

/// The server's region (the target of writes, reads, atomic writes and flushes) and so the
/// largest message.
inline constexpr std::size_t max_message_size = std::size_t{16} << 20;
inline constexpr std::uint32_t max_queue_depth = 256;
inline constexpr std::uint32_t max_connections = 64;
inline constexpr std::uint64_t max_iterations = std::uint64_t{1} << 40;
inline constexpr double max_duration_s = 24.0 * 3600;
inline constexpr std::size_t atomic_write_size = 8;

struct options {
  role who = role::client;
  std::string addr = "127.0.0.1";
  std::string port = "18515";  // ib_*_lat/bw's default port
  provider_choice provider = provider_choice::auto_detect;
  // server
  bool once = false;          ///< exit after the first client's run
  std::uint32_t clients = 0;  ///< exit after this many client runs; 0 = until a signal
  // client
  test_kind test = test_kind::lat;
  op_kind op = op_kind::write;
  std::vector<std::size_t> sizes;  ///< in the order given; filled with the op's default
  std::uint32_t qd = 1;
  std::uint32_t conns = 1;
  std::uint64_t iters = 0;  ///< per connection and size; 0 when duration_s is used
  double duration_s = 0;    ///< per size; 0 when iters is used
  std::uint64_t warmup = 0;
  poll_mode mode = poll_mode::coroutine;
  std::string json_path;  ///< empty: no JSON
};

/// What parse_args made of argv: options, or a request for help, or an error message.
struct parse_result {
  std::optional<options> opts;
  bool help = false;
  std::string error;  ///< set when neither opts nor help
};

[[nodiscard]] parse_result parse_args(std::span<const std::string_view> args);
/// The --help text (also what a usage error points to).
[[nodiscard]] std::string usage_text();

[[nodiscard]] std::string_view to_string(test_kind t) noexcept;
[[nodiscard]] std::string_view to_string(op_kind o) noexcept;
[[nodiscard]] std::string_view to_string(poll_mode m) noexcept;
[[nodiscard]] std::string_view to_string(provider_choice p) noexcept;

}  // namespace arpma_perf
