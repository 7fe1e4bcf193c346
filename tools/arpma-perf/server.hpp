// The server: registers one region (the target of the clients' writes, reads, atomic
// writes and flushes), hands its descriptor to each client in the accept's private data,
// keeps receives posted (and echoes, for send lat) when a client sends, and serves until
// --once / --clients runs are done or SIGINT/SIGTERM.
#pragma once

#include "args.hpp"

#include <string>

namespace arpma_perf {

/// Runs the server; returns the exit status (see setup.hpp).
int run_server(const options& opts, const std::string& provider);

}  // namespace arpma_perf
