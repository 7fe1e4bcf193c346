// Memory that a registration may not cover, made deterministically for the
// tests of the soft provider's memory safety: pages of our own that can be
// taken away (PROT_NONE, as an application revoking what it registered), and
// the end of the highest mapping, above which nothing is mapped. A hole made
// with munmap is not used: another mapping (a sanitizer's own, a thread's)
// may fill it at any time.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

namespace arpma::test {

inline std::size_t page_size() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

/// The end of the highest user mapping (the stack, usually): every address
/// from there up is unmapped (the kernel's vsyscall page aside, which is not
/// a user mapping).
inline std::uintptr_t highest_mapping_end() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::uintptr_t end = 0;
  while (std::getline(maps, line)) {
    const auto dash = line.find('-');
    const auto space = line.find(' ');
    if (dash == std::string::npos || space == std::string::npos) continue;
    const auto e =
        static_cast<std::uintptr_t>(std::stoull(line.substr(dash + 1, space), nullptr, 16));
    if (e < (std::uintptr_t{1} << 56)) end = e > end ? e : end;
  }
  return end;
}

/// Anonymous pages of our own, unmapped when the test ends.
struct pages {
  explicit pages(std::size_t n, int prot = PROT_READ | PROT_WRITE) : size(n * page_size()) {
    void* p = ::mmap(nullptr, size, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base = p == MAP_FAILED ? nullptr : static_cast<std::uint8_t*>(p);
  }
  ~pages() {
    if (base != nullptr) ::munmap(base, size);
  }
  pages(const pages&) = delete;
  pages& operator=(const pages&) = delete;
  /// Takes page `i` onwards away (no access at all), as an application that
  /// revokes or frees memory it registered: touching it faults as touching
  /// unmapped memory does.
  void revoke_from(std::size_t i) const {
    (void)::mprotect(base + i * page_size(), size - i * page_size(), PROT_NONE);
  }
  std::uint8_t* base = nullptr;
  std::size_t size = 0;
};

}  // namespace arpma::test
