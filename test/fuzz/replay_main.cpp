// Runs a libFuzzer harness over the seed files of a corpus directory, once
// each, without libFuzzer: the harnesses then build with any compiler and run
// in every test preset (ASan and TSan included), so a harness that stops
// compiling, or a seed that stops passing, fails CI and not the next fuzzing
// session. Exit status: 0 every seed ran, 1 a bad argument or an unreadable seed
// (a finding aborts inside the harness, as under libFuzzer).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
// Defined by the harnesses that set something up first.
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 1;
  }
  if (LLVMFuzzerInitialize != nullptr) (void)LLVMFuzzerInitialize(&argc, &argv);
  std::error_code ec;
  std::vector<std::filesystem::path> seeds;
  for (const auto& entry : std::filesystem::directory_iterator(argv[1], ec))
    if (entry.is_regular_file()) seeds.push_back(entry.path());
  if (ec || seeds.empty()) {
    std::fprintf(stderr, "%s: no seeds in %s\n", argv[0], argv[1]);
    return 1;
  }
  std::sort(seeds.begin(), seeds.end());  // the same order every run
  for (const auto& seed : seeds) {
    std::ifstream in(seed, std::ios::binary);
    const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(in),
                                          std::istreambuf_iterator<char>()};
    if (!in.eof() && in.fail()) {
      std::fprintf(stderr, "%s: cannot read %s\n", argv[0], seed.c_str());
      return 1;
    }
    (void)LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  std::printf("%zu seeds of %s ran\n", seeds.size(), argv[1]);
  return 0;
}
