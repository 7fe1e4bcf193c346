// The client: connects --conns connections to the server, runs each size of the sweep
// (warm-up, then the measured operations), prints a table row per size, and on the end of
// the run, or on SIGINT/SIGTERM, the JSON and the exit status.
#pragma once

#include "args.hpp"

#include <string>

namespace arpma_perf {

/// Runs the client; returns the exit status (see setup.hpp).
int run_client(const options& opts, const std::string& provider);

}  // namespace arpma_perf
