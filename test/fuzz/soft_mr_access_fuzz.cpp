// libFuzzer harness for the soft provider's remote-operation validator:
// soft_dp::within (src/provider/soft/soft_mr.hpp), which every remote and
// local access of the soft data path goes through, and
// soft_dp::write_destination, which adds the rkey lookup in the process-wide
// MR table (the direct placement of large WRITEs).
//
// Input: a region, then queries, little-endian:
//   region   base u64 (0 is made 1: a registered address is never null; base
//            + length is kept within 2^64 as for real memory), length u64,
//            access u16, pd u8 (bit 0: which of two PDs)
//   queries  until the input ends: addr u64, len u64, need u16, pd u8,
//            mode u8 (bit 0: addr is relative to base instead of absolute;
//            bit 1: also ask write_destination on the registered regions,
//            bits 2-3 choose which, bit 4: use the u32 after it as the rkey)
//
// Oracle, computed independently in 128-bit arithmetic: the access is
// accepted exactly when the PDs match, access has every bit of need, and
// base <= addr and addr + len <= base + length; an accepted access points at
// base + (addr - base). No access outside the region is ever accepted.
#include "fuzz_input.hpp"
#include "provider/provider.hpp"
#include "provider/soft/soft_datapath.hpp"
#include "provider/soft/soft_mr.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

namespace {

namespace prov = arpma::provider;
namespace dp = arpma::provider::soft_dp;
__extension__ typedef unsigned __int128
    u128;  // NOLINT(modernize-use-using): __extension__ keeps -Wpedantic quiet

constexpr const char* kName = "soft_mr_access_fuzz";

void check(bool ok, const char* what) {
  if (!ok) fuzz::property_failed(kName, what);
}

bool expected(u128 base, u128 length, int access, int pd, u128 addr, u128 len, int need,
              int want_pd) {
  return pd == want_pd && (access & need) == need && addr >= base && addr + len <= base + length;
}

/// Three registered regions over one buffer, made once: the table lookup
/// path with real rkeys.
struct registered {
  struct entry {
    prov::mr* handle = nullptr;
    std::uint8_t* addr = nullptr;
    std::size_t length = 0;
    int access = 0;
    int pd = 0;
    std::uint32_t rkey = 0;
  };
  std::array<dp::soft_pd, 2> pds;
  std::unique_ptr<std::uint8_t[]> buffer{new std::uint8_t[4096]};
  std::array<entry, 3> regions;
  std::array<dp::soft_qp, 2> qps;  // only their pd is read

  registered() {
    const int rw = prov::access::remote_write | prov::access::remote_read;
    const std::array<entry, 3> layout{
        {{nullptr, buffer.get() + 64, 1024, rw, 0, 0},
         {nullptr, buffer.get() + 2048, 512, prov::access::remote_read, 0, 0},
         {nullptr, buffer.get() + 3072, 256, rw, 1, 0}}};
    for (std::size_t i = 0; i < layout.size(); ++i) {
      regions[i] = layout[i];
      auto r = dp::register_mr(&pds[static_cast<std::size_t>(regions[i].pd)], regions[i].addr,
                               regions[i].length, regions[i].access);
      if (!r) fuzz::property_failed(kName, "register_mr failed");
      regions[i].handle = r.value();
      regions[i].rkey = dp::rkey_of(r.value());
    }
    qps[0].pd = &pds[0];
    qps[1].pd = &pds[1];
  }
  registered(const registered&) = delete;
  registered& operator=(const registered&) = delete;
  ~registered() {
    for (auto& e : regions) (void)dp::deregister_mr(e.handle);
  }
};

registered& table() {
  static registered instance;
  return instance;
}

void query_table(fuzz::input& in, std::uint64_t addr_field, std::uint64_t len, bool relative,
                 int pd, std::uint8_t mode) {
  registered& t = table();
  const auto& target = t.regions[(mode >> 2) % t.regions.size()];
  const std::uint32_t rkey = (mode & 0x10) != 0 ? in.u32() : target.rkey;
  const auto base = reinterpret_cast<std::uintptr_t>(target.addr);
  const std::uint64_t addr = relative ? base + addr_field : addr_field;  // wraps, on purpose
  const registered::entry* hit = nullptr;
  for (const auto& e : t.regions)
    if (e.rkey == rkey) hit = &e;
  const bool ok =
      hit != nullptr && expected(reinterpret_cast<std::uintptr_t>(hit->addr), hit->length,
                                 hit->access, hit->pd, addr, len, prov::access::remote_write, pd);
  std::uint8_t* got = nullptr;
  {
    const auto memory = dp::lock_memory();
    got = dp::write_destination(t.qps[static_cast<std::size_t>(pd)], rkey, addr, len);
  }
  check((got != nullptr) == ok, "write_destination disagrees with the independent bounds check");
  if (ok)
    check(got == hit->addr + (addr - reinterpret_cast<std::uintptr_t>(hit->addr)),
          "write_destination points elsewhere than addr");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::input in(data, size);
  static std::array<dp::soft_pd, 2> pds;

  std::uint64_t base = in.u64();
  if (base == 0) base = 1;
  std::uint64_t length = in.u64();
  const std::uint64_t room = std::numeric_limits<std::uint64_t>::max() - base;
  if (length > room) length = room;
  const int access = in.u16();
  const int pd = in.u8() & 1;

  dp::soft_mr m;
  m.pd = &pds[static_cast<std::size_t>(pd)];
  // A made-up address: within() only compares and offsets it, never reads it.
  m.addr = reinterpret_cast<std::uint8_t*>(static_cast<std::uintptr_t>(base));  // NOLINT
  m.length = length;
  m.access = access;

  while (!in.empty()) {
    const std::uint64_t addr_field = in.u64();
    const std::uint64_t len = in.u64();
    const int need = in.u16();
    const int want_pd = in.u8() & 1;
    const std::uint8_t mode = in.u8();
    const bool relative = (mode & 1) != 0;
    const std::uint64_t addr = relative ? base + addr_field : addr_field;

    const bool ok = expected(base, length, access, pd, addr, len, need, want_pd);
    const std::uint8_t* got =
        dp::within(&m, &pds[static_cast<std::size_t>(want_pd)], addr, len, need);
    check((got != nullptr) == ok, "within() disagrees with the independent bounds check");
    if (ok) {
      const auto at = reinterpret_cast<std::uintptr_t>(got);
      check(at == addr, "an accepted access does not point at its address");
      check(u128{at} + len <= u128{base} + length, "an accepted access ends outside the region");
    }
    check(dp::within(nullptr, m.pd, addr, len, need) == nullptr, "a missing region was accepted");
    if ((mode & 2) != 0) query_table(in, addr_field, len, relative, want_pd, mode);
  }
  return 0;
}
