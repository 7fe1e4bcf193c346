// What the progress thread's spin follows: bytes moved on a link.
#pragma once

#include <cstdint>

namespace arpma::provider::soft_traffic {

/// Calls on this thread that moved bytes on a socket (a read or a write that
/// transferred any, a connection accepted or made). The progress thread spins
/// after such work only: a timer's housekeeping (an ack tick, a lease watch)
/// or a handler posted by an application thread does not keep it awake
/// (soft_engine.hpp). Each thread counts its own; only the progress thread
/// reads its count.
inline thread_local std::uint64_t moved = 0;

inline void note() noexcept { ++moved; }

}  // namespace arpma::provider::soft_traffic
