// A soft memory region and the check every access to one goes through (the
// remote-operation validator): in its own header so that the fuzz harness
// test/fuzz/soft_mr_access_fuzz.cpp can call it in isolation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace arpma::provider::soft_dp {

struct soft_pd;

struct soft_mr {
  soft_pd* pd = nullptr;
  std::uint8_t* addr = nullptr;
  std::size_t length = 0;
  int access = 0;
  std::uint32_t lkey = 0;
  std::uint32_t rkey = 0;
};

/// The registered bytes [addr, addr + len) of `m`, if `m` belongs to `pd`,
/// allows `need` and holds the whole range; nullptr otherwise. Overflow-safe:
/// no sum of untrusted values is formed.
inline std::uint8_t* within(const soft_mr* m, const soft_pd* pd, std::uint64_t addr,
                            std::uint64_t len, int need) noexcept {
  if (m == nullptr || m->pd != pd || (m->access & need) != need) return nullptr;
  const auto base = reinterpret_cast<std::uintptr_t>(m->addr);
  if (addr < base || len > m->length || addr - base > m->length - len) return nullptr;
  return m->addr + (addr - base);
}

}  // namespace arpma::provider::soft_dp
