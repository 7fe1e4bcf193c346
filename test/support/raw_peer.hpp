// A raw TCP peer of the soft provider, for the tests that play a hostile or
// malformed peer: frames built from docs/soft-provider.md independently of
// the provider (so the tests pin the wire format), and bounded socket I/O.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <vector>

namespace arpma::test::raw {

/// How long a read from the provider may take before the test gives up.
inline constexpr std::chrono::milliseconds wait_limit{5000};

inline int raw_connect(std::uint16_t port) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool write_all(int fd, const std::vector<std::uint8_t>& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

/// Exactly `n` bytes within the wait limit; shorter on EOF or timeout.
inline std::vector<std::uint8_t> read_exact(int fd, std::size_t n) {
  std::vector<std::uint8_t> out;
  const auto deadline = std::chrono::steady_clock::now() + wait_limit;
  while (out.size() < n) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd ready{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&ready, 1, static_cast<int>(left.count())) != 1) break;
    std::array<std::uint8_t, 512> buf{};
    const ssize_t got = ::recv(fd, buf.data(), std::min(buf.size(), n - out.size()), 0);
    if (got <= 0) break;
    out.insert(out.end(), buf.begin(), buf.begin() + got);
  }
  return out;
}

inline bool closed_by_peer(int fd) {
  const auto deadline = std::chrono::steady_clock::now() + wait_limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd ready{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&ready, 1, static_cast<int>(left.count())) != 1) return false;
    std::array<std::uint8_t, 256> buf{};
    if (::recv(fd, buf.data(), buf.size(), 0) <= 0) return true;
  }
}

inline void put_be(std::vector<std::uint8_t>& out, std::uint64_t v, int bytes) {
  for (int shift = (bytes - 1) * 8; shift >= 0; shift -= 8)
    out.push_back(static_cast<std::uint8_t>(v >> shift));
}

/// A frame as docs/soft-provider.md specifies it, built independently of the
/// provider so the test pins the wire format.
inline std::vector<std::uint8_t> wire_frame(std::uint8_t type,
                                            const std::vector<std::uint8_t>& payload,
                                            std::uint32_t length_field = 0xffffffff) {
  std::vector<std::uint8_t> out;
  put_be(out, 0x4152504d, 4);
  out.push_back(1);
  out.push_back(type);
  put_be(out, 0, 2);
  put_be(out, length_field != 0xffffffff ? length_field : payload.size(), 4);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

inline std::vector<std::uint8_t> remote(std::uint32_t rkey, std::uint64_t addr) {
  std::vector<std::uint8_t> p;
  put_be(p, rkey, 4);
  put_be(p, addr, 8);
  return p;
}

inline std::vector<std::uint8_t> write_frame(std::uint32_t rkey, std::uint64_t addr,
                                             std::size_t len) {
  auto p = remote(rkey, addr);
  p.insert(p.end(), len, 0xcc);
  return wire_frame(18, p);
}

inline std::vector<std::uint8_t> read_frame(std::uint32_t rkey, std::uint64_t addr,
                                            std::uint32_t len) {
  auto p = remote(rkey, addr);
  put_be(p, len, 4);
  return wire_frame(20, p);
}

inline const std::vector<std::uint8_t> nak_access = {0x41, 0x52, 0x50, 0x4d, 1, 24, 0, 0,
                                                     0,    0,    0,    4,    0, 0,  0, 10};

/// How long `fd` stayed open (until EOF or reset), reading what comes.
inline std::chrono::milliseconds open_for(int fd, std::chrono::milliseconds limit) {
  const auto start = std::chrono::steady_clock::now();
  std::array<std::uint8_t, 512> buf{};
  for (;;) {
    const auto left = limit - std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - start);
    pollfd ready{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&ready, 1, static_cast<int>(left.count())) != 1) break;
    if (::recv(fd, buf.data(), buf.size(), 0) <= 0) break;
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

}  // namespace arpma::test::raw
