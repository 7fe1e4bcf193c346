#include "report.hpp"

#include <cmath>
#include <cstdio>

namespace arpma_perf {
namespace {

std::string format(const char* fmt, auto... values) {
  char buf[256];
  const int n = std::snprintf(buf, sizeof buf, fmt, values...);
  return {buf, n > 0 ? std::min<std::size_t>(static_cast<std::size_t>(n), sizeof buf - 1) : 0};
}

double us(std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

// JSON has no NaN or infinity; these figures cannot be either, but a broken file is worse
// than a null.
std::string json_number(double v) { return std::isfinite(v) ? format("%.9g", v) : "null"; }

std::string json_result(const size_result& s) {
  std::string j = "{\"size\": " + std::to_string(s.size) + ", \"ops\": " + std::to_string(s.ops);
  j += ", \"complete\": " + std::string(s.complete ? "true" : "false");
  j += ", \"elapsed_s\": " + json_number(s.elapsed_s);
  j += ", \"ops_per_s\": " + json_number(s.ops_per_s);
  j += ", \"gb_per_s\": " + json_number(s.gb_per_s);
  j += R"(, "latency_ns": {"min": )" + std::to_string(s.min_ns);
  j += ", \"median\": " + std::to_string(s.median_ns);
  j += ", \"p99\": " + std::to_string(s.p99_ns);
  j += ", \"p99_9\": " + std::to_string(s.p999_ns);
  j += ", \"max\": " + std::to_string(s.max_ns);
  j += ", \"mean\": " + json_number(s.mean_ns) + "}}";
  return j;
}

std::string json_parameters(const options& o) {
  std::string j = "{\"addr\": " + json_string(o.addr) + ", \"port\": " + json_string(o.port);
  j += ", \"test\": " + json_string(to_string(o.test));
  j += ", \"op\": " + json_string(to_string(o.op));
  j += ", \"mode\": " + json_string(to_string(o.mode));
  j += ", \"qd\": " + std::to_string(o.qd) + ", \"conns\": " + std::to_string(o.conns);
  j += ", \"iters\": " + (o.iters != 0 ? std::to_string(o.iters) : std::string("null"));
  j += ", \"duration_s\": " + (o.duration_s > 0 ? json_number(o.duration_s) : "null");
  j += ", \"warmup\": " + std::to_string(o.warmup);
  j += ", \"sizes\": [";
  for (std::size_t i = 0; i < o.sizes.size(); ++i)
    j += (i != 0 ? ", " : "") + std::to_string(o.sizes[i]);
  return j + "]}";
}

}  // namespace

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          out += format("\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
        else
          out += c;
    }
  }
  return out + "\"";
}

std::string to_json(const run_report& r, std::string_view version) {
  std::string j = R"({"tool": "arpma-perf", "version": )" + json_string(version);
  j += ", \"provider\": " + json_string(r.provider);
  j += ", \"parameters\": " + json_parameters(r.opts);
  j += ", \"interrupted\": " + std::string(r.interrupted ? "true" : "false");
  j += ", \"error\": " + (r.error.empty() ? std::string("null") : json_string(r.error));
  j += ", \"results\": [";
  for (std::size_t i = 0; i < r.results.size(); ++i)
    j += (i != 0 ? ",\n  " : "\n  ") + json_result(r.results[i]);
  return j + (r.results.empty() ? "]}\n" : "\n]}\n");
}

std::string table_header(const run_report& r) {
  const options& o = r.opts;
  std::string h = std::string(to_string(o.op)) + " " + std::string(to_string(o.test)) + ", " +
                  r.provider + " provider, " + o.addr + ":" + o.port + ", " +
                  std::to_string(o.conns) + (o.conns == 1 ? " connection" : " connections") +
                  ", qd " + std::to_string(o.qd) + ", " + std::string(to_string(o.mode)) + ", ";
  h += o.iters != 0 ? std::to_string(o.iters) + " iterations" : format("%g s", o.duration_s);
  h += " per size\n";
  h += format("%10s %11s %9s %9s %9s %9s %10s %12s %9s\n", "bytes", "ops", "min us", "median",
              "p99", "p99.9", "max", "ops/s", "GB/s");
  return h;
}

std::string table_row(const size_result& s) {
  return format("%10zu %11llu %9.2f %9.2f %9.2f %9.2f %10.2f %12.0f %9.4f%s\n", s.size,
                static_cast<unsigned long long>(s.ops), us(s.min_ns), us(s.median_ns), us(s.p99_ns),
                us(s.p999_ns), us(s.max_ns), s.ops_per_s, s.gb_per_s,
                s.complete ? "" : "  (cut short)");
}

}  // namespace arpma_perf
