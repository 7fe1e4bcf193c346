#include "setup.hpp"

#include <infiniband/verbs.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace arpma_perf {

std::string select_provider(provider_choice choice) {
  std::string name;
  if (choice == provider_choice::soft || choice == provider_choice::verbs) {
    name = std::string(to_string(choice));
  } else {
    const char* env = std::getenv("ARPMA_PROVIDER");  // NOLINT(concurrency-mt-unsafe): one thread
    const std::string_view e = env != nullptr ? env : "";
    if (e == "soft" || e == "verbs") {
      name = std::string(e);
    } else {
      // The library's own rule for auto (src/provider/registry.cpp), made explicit here so
      // the report can name the provider.
      int count = 0;
      ibv_device** list = ibv_get_device_list(&count);
      if (list != nullptr) ibv_free_device_list(list);
      name = count > 0 ? "verbs" : "soft";
    }
  }
  ::setenv("ARPMA_PROVIDER", name.c_str(), 1);  // NOLINT(concurrency-mt-unsafe): one thread
  return name;
}

std::optional<arpma::peer> make_peer(const std::string& addr, bool server) {
  auto device = arpma::get_ibv_context(
      addr, server ? arpma::ibv_context_type::local : arpma::ibv_context_type::remote);
  if (!device) {
    std::fprintf(stderr, "arpma-perf: no RDMA device for %s: %s\n", addr.c_str(),
                 device.error().message().c_str());
    return std::nullopt;
  }
  auto peer = arpma::peer::create(device.value());
  if (!peer) {
    std::fprintf(stderr, "arpma-perf: cannot create the peer: %s\n",
                 peer.error().message().c_str());
    return std::nullopt;
  }
  return std::move(peer.value());
}

}  // namespace arpma_perf
