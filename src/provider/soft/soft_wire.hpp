// The soft provider's frame format (docs/soft-provider.md, "Wire protocol"):
// shared by the connection manager and the data path.
#pragma once

#include "provider/provider.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <utility>
#include <vector>

namespace arpma::provider::soft_wire {

inline constexpr std::uint32_t frame_magic = 0x4152504d;  // "ARPM"
inline constexpr std::uint8_t frame_version = 1;
inline constexpr std::size_t header_size = 12;
inline constexpr std::size_t conn_fixed_size = 8;  // REQ and REP: 4 parameters + QP number
inline constexpr std::size_t rej_fixed_size = 2;   // REJ: reason

/// The longest message a send, write or read may carry; also what bounds the
/// buffer a frame can make the receiver allocate.
inline constexpr std::size_t max_message = std::size_t{8} << 20;

enum class frame_type : std::uint8_t {
  // connection manager
  req = 1,
  rep = 2,
  rej = 3,
  rtu = 4,
  dreq = 5,
  // data path: requests
  send = 16,
  send_imm = 17,
  write = 18,
  write_imm = 19,
  read_req = 20,
  atomic_write = 21,
  flush = 22,
  // data path: responses
  ack = 23,
  nak = 24,
  read_resp = 25,
};

// Fixed parts of the data-path frames.
inline constexpr std::size_t remote_size = 12;                     // rkey u32, addr u64
inline constexpr std::size_t read_req_size = remote_size + 4;      // + length u32
inline constexpr std::size_t atomic_write_size = remote_size + 8;  // + value
inline constexpr std::size_t flush_size = remote_size + 10;        // + length u64, type, level

using header_bytes = std::array<std::uint8_t, header_size>;

/// Every byte of a frame is written before it is read: growing one leaves
/// the new bytes as they are, so a payload about to be copied in is not
/// zero-filled first (a second pass over 64 KiB per queued write).
template <class T>
struct uninitialized_allocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = uninitialized_allocator<U>;
  };
  uninitialized_allocator() noexcept = default;
  template <class U>
  explicit uninitialized_allocator(const uninitialized_allocator<U>& /*other*/) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

using frame = std::vector<std::uint8_t, uninitialized_allocator<std::uint8_t>>;

inline void put_u16(std::uint8_t* p, std::uint16_t v) noexcept {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
inline void put_u32(std::uint8_t* p, std::uint32_t v) noexcept {
  put_u16(p, static_cast<std::uint16_t>(v >> 16));
  put_u16(p + 2, static_cast<std::uint16_t>(v));
}
inline void put_u64(std::uint8_t* p, std::uint64_t v) noexcept {
  put_u32(p, static_cast<std::uint32_t>(v >> 32));
  put_u32(p + 4, static_cast<std::uint32_t>(v));
}
inline std::uint16_t get_u16(const std::uint8_t* p) noexcept {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}
inline std::uint32_t get_u32(const std::uint8_t* p) noexcept {
  return (static_cast<std::uint32_t>(get_u16(p)) << 16) | get_u16(p + 2);
}
inline std::uint64_t get_u64(const std::uint8_t* p) noexcept {
  return (static_cast<std::uint64_t>(get_u32(p)) << 32) | get_u32(p + 4);
}

struct payload_bounds {
  std::size_t min;
  std::size_t max;
};

inline payload_bounds exactly(std::size_t n) noexcept { return {n, n}; }
inline payload_bounds with_data(std::size_t fixed) noexcept { return {fixed, fixed + max_message}; }

inline std::optional<payload_bounds> bounds_of(std::uint8_t type) noexcept {
  switch (static_cast<frame_type>(type)) {
    case frame_type::req:
      return payload_bounds{conn_fixed_size, conn_fixed_size + max_connect_private_data};
    case frame_type::rep:
      return payload_bounds{conn_fixed_size, conn_fixed_size + max_accept_private_data};
    case frame_type::rej:
      return payload_bounds{rej_fixed_size, rej_fixed_size + max_reject_private_data};
    case frame_type::rtu:
    case frame_type::dreq: return exactly(0);
    case frame_type::send:
    case frame_type::read_resp: return with_data(0);
    case frame_type::send_imm: return with_data(4);
    case frame_type::write: return with_data(remote_size);
    case frame_type::write_imm: return with_data(remote_size + 4);
    case frame_type::read_req: return exactly(read_req_size);
    case frame_type::atomic_write: return exactly(atomic_write_size);
    case frame_type::flush: return exactly(flush_size);
    case frame_type::ack:
    case frame_type::nak: return exactly(4);
  }
  return std::nullopt;
}

[[nodiscard]] inline bool is_data(frame_type type) noexcept {
  return static_cast<std::uint8_t>(type) >= static_cast<std::uint8_t>(frame_type::send);
}

struct frame_header {
  frame_type type;
  std::uint32_t length;
};

/// A header we accept: our magic and version, no flags, a known type and a
/// payload length within that type's bounds. Anything else closes the link.
inline std::optional<frame_header> parse_header(const header_bytes& h) noexcept {
  if (get_u32(h.data()) != frame_magic || h[4] != frame_version || get_u16(h.data() + 6) != 0)
    return std::nullopt;
  const auto bounds = bounds_of(h[5]);
  const std::uint32_t length = get_u32(h.data() + 8);
  if (!bounds || length < bounds->min || length > bounds->max) return std::nullopt;
  return frame_header{static_cast<frame_type>(h[5]), length};
}

/// Frame buffers a thread built and then sent whole come back here, a few
/// small ones per thread: a post builds its frame on the application's
/// thread and the socket usually takes it at once, so once warm the post
/// path allocates nothing. A frame the socket did not take at once is
/// written, and given back, by the progress thread: what overflows a
/// thread's cache goes to a small pool every thread shares, where the
/// application's thread finds it when its own cache runs dry. Bounded:
/// max_frames per thread plus max_shared, each at most max_bytes.
class frame_cache {
 public:
  static constexpr std::size_t max_frames = 8;
  static constexpr std::size_t max_shared = 32;
  static constexpr std::size_t max_bytes = 4096;

  /// A frame of `size` bytes, from a cache when one has it.
  static frame take(std::size_t size) {
    auto& c = frames();
    if (c.empty() && !shared().take(c)) return frame(size);
    frame f = std::move(c.back());
    c.pop_back();
    f.resize(size);
    return f;
  }
  /// Keeps `f`'s buffer for the next take (or lets it go).
  static void give_back(frame&& f) noexcept {
    if (f.capacity() == 0 || f.capacity() > max_bytes) return;
    f.clear();
    auto& c = frames();
    if (c.size() < max_frames) {
      c.push_back(std::move(f));  // reserved below: never allocates
      return;
    }
    shared().give_back(std::move(f));
  }
  /// Frames in the shared pool now (for tests).
  [[nodiscard]] static std::size_t shared_frames() noexcept { return shared().size(); }

 private:
  static std::vector<frame>& frames() {
    thread_local std::vector<frame> cache = [] {
      std::vector<frame> v;
      v.reserve(max_frames);
      return v;
    }();
    return cache;
  }

  class pool {
   public:
    pool() { spare_.reserve(max_shared); }
    /// Moves up to half a thread cache's worth into `into` (empty, with
    /// room for max_frames): one lock for several takes.
    bool take(std::vector<frame>& into) noexcept {
      const std::lock_guard lock(mutex_);
      for (std::size_t i = 0; i < max_frames / 2 && !spare_.empty(); ++i) {
        into.push_back(std::move(spare_.back()));
        spare_.pop_back();
      }
      return !into.empty();
    }
    void give_back(frame&& f) noexcept {
      const std::lock_guard lock(mutex_);
      if (spare_.size() < max_shared) spare_.push_back(std::move(f));
    }
    std::size_t size() noexcept {
      const std::lock_guard lock(mutex_);
      return spare_.size();
    }

   private:
    std::mutex mutex_;
    std::vector<frame> spare_;
  };
  /// Never destroyed: a thread may give back after static destruction began.
  static pool& shared() {
    static pool* const p = new pool;  // NOLINT(cppcoreguidelines-owning-memory)
    return *p;
  }
};

/// A frame of `type`: its fixed fields, then variable data (private data or
/// the message), in one buffer so it goes out in one write.
inline frame make_frame(frame_type type, const std::uint8_t* fixed, std::size_t fixed_len,
                        const void* data, std::size_t data_len) {
  frame out = frame_cache::take(header_size + fixed_len + data_len);
  put_u32(out.data(), frame_magic);
  out[4] = frame_version;
  out[5] = static_cast<std::uint8_t>(type);
  put_u16(out.data() + 6, 0);
  put_u32(out.data() + 8, static_cast<std::uint32_t>(fixed_len + data_len));
  if (fixed_len > 0) std::memcpy(out.data() + header_size, fixed, fixed_len);
  if (data_len > 0) std::memcpy(out.data() + header_size + fixed_len, data, data_len);
  return out;
}

/// A frame's header and fixed fields, its length counting `data_len` bytes
/// the sender writes straight after them from where they lie.
inline frame make_head(frame_type type, const std::uint8_t* fixed, std::size_t fixed_len,
                       std::size_t data_len) {
  frame out = make_frame(type, fixed, fixed_len, nullptr, 0);
  put_u32(out.data() + 8, static_cast<std::uint32_t>(fixed_len + data_len));
  return out;
}

}  // namespace arpma::provider::soft_wire
