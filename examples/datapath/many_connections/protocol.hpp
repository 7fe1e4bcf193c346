// The many-connections example's protocol: the server's region has one slot
// per connection; the accept's private data carries the region's descriptor
// and then the slot (one byte). Each connection writes `messages` texts of
// its own into its slot, message j at offset j * message_size, flushes the
// slot, and disconnects.
#pragma once

#include <arpma/mr.hpp>

#include <cstddef>

namespace many_connections {

inline constexpr int connections = 8;
inline constexpr int messages = 3;
inline constexpr std::size_t message_size = 64;
inline constexpr std::size_t slot_size = messages * message_size;
inline constexpr std::size_t pdata_size = arpma::mr_descriptor_size + 1;

}  // namespace many_connections
