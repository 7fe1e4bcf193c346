#include "protocol.hpp"

namespace arpma_perf {
namespace {

constexpr std::array<std::uint8_t, 4> magic = {'A', 'P', 'R', 'F'};
constexpr std::uint8_t version = 1;

// Little-endian on the wire, whatever the hosts are.
void put(std::uint8_t* at, std::uint64_t v, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i) at[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

std::uint64_t get(const std::uint8_t* at, std::size_t bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < bytes; ++i) v |= std::uint64_t{at[i]} << (8 * i);
  return v;
}

}  // namespace

// magic[4] version[1] op[1] test[1] mode[1] max_size[4] qd[4] conns[4] run_id[8]
std::array<std::uint8_t, hello_size> encode(const hello& h) {
  std::array<std::uint8_t, hello_size> out{};
  std::copy(magic.begin(), magic.end(), out.begin());
  out[4] = version;
  out[5] = static_cast<std::uint8_t>(h.op);
  out[6] = static_cast<std::uint8_t>(h.test);
  out[7] = static_cast<std::uint8_t>(h.mode);
  put(&out[8], h.max_size, 4);
  put(&out[12], h.qd, 4);
  put(&out[16], h.conns, 4);
  put(&out[20], h.run_id, 8);
  return out;
}

std::optional<hello> decode(std::span<const std::uint8_t> data) {
  if (data.size() < hello_size || !std::equal(magic.begin(), magic.end(), data.begin()) ||
      data[4] != version)
    return std::nullopt;
  if (data[5] > static_cast<std::uint8_t>(op_kind::flush) ||
      data[6] > static_cast<std::uint8_t>(test_kind::bw) ||
      data[7] > static_cast<std::uint8_t>(poll_mode::busy_poll))
    return std::nullopt;
  hello h;
  h.op = static_cast<op_kind>(data[5]);
  h.test = static_cast<test_kind>(data[6]);
  h.mode = static_cast<poll_mode>(data[7]);
  h.max_size = static_cast<std::uint32_t>(get(&data[8], 4));
  h.qd = static_cast<std::uint32_t>(get(&data[12], 4));
  h.conns = static_cast<std::uint32_t>(get(&data[16], 4));
  h.run_id = get(&data[20], 8);
  if (h.max_size == 0 || h.max_size > max_message_size || h.qd == 0 || h.qd > max_queue_depth ||
      h.conns == 0 || h.conns > max_connections)
    return std::nullopt;
  return h;
}

}  // namespace arpma_perf
