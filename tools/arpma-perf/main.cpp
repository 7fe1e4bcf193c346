// arpma-perf: RDMA latency and bandwidth with arpma, in the manner of perftest's
// ib_write_lat / ib_write_bw and rdma-core's rping. See README.md in this folder.
#include "args.hpp"
#include "client.hpp"
#include "server.hpp"
#include "setup.hpp"

#include <cstdio>
#include <span>
#include <string_view>
#include <vector>

int main(int argc, char* argv[]) {
  using namespace arpma_perf;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line visible at once, also in a pipe
  const std::span<char*> argl(argv, static_cast<std::size_t>(argc));
  const std::vector<std::string_view> args(argl.begin() + (argl.empty() ? 0 : 1), argl.end());
  const parse_result parsed = parse_args(args);
  if (parsed.help) {
    std::printf("%s", usage_text().c_str());
    return exit_ok;
  }
  if (!parsed.opts) {
    std::fprintf(stderr, "arpma-perf: %s\n%s", parsed.error.c_str(), usage_text().c_str());
    return exit_usage;
  }
  const options& o = *parsed.opts;
  const std::string provider = select_provider(o.provider);
  return o.who == role::server ? run_server(o, provider) : run_client(o, provider);
}
