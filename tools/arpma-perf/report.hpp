// What a client run produced, as a table for people and as JSON for programs.
#pragma once

#include "args.hpp"
#include "stats.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace arpma_perf {

struct run_report {
  options opts;
  std::string provider;  ///< the provider actually used: soft or verbs
  std::vector<size_result> results;
  bool interrupted = false;  ///< a signal cut the run short
  std::string error;         ///< why the run failed; empty when it did not
};

/// "write lat, soft provider, 1 connection, qd 1, coroutine, 10000 iterations" and the
/// column names.
[[nodiscard]] std::string table_header(const run_report& r);
[[nodiscard]] std::string table_row(const size_result& s);
/// The whole report as one JSON object (see README.md for its fields), newline-terminated.
[[nodiscard]] std::string to_json(const run_report& r, std::string_view version);
/// `s` as a JSON string literal, quotes included.
[[nodiscard]] std::string json_string(std::string_view s);

}  // namespace arpma_perf
