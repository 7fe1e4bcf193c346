// Parsing is strict on purpose: a benchmark run with a silently ignored or clamped option
// measures something else than what its reader thinks.
#include "args.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <stdexcept>

namespace arpma_perf {
namespace {

// A usage error; parse_args turns it into parse_result::error.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string& what) { throw usage_error(what); }

constexpr std::uint64_t default_iters = 10000;
constexpr std::uint64_t default_warmup = 100;
constexpr std::uint32_t default_bw_qd = 16;

struct option_spec {
  std::string_view name;
  bool takes_value;
  bool server;  ///< allowed with `server`
  bool client;  ///< allowed with `client`
};

constexpr option_spec specs[] = {
    {"--addr", true, true, true},     {"--port", true, true, true},
    {"--provider", true, true, true}, {"--once", false, true, false},
    {"--clients", true, true, false}, {"--test", true, false, true},
    {"--op", true, false, true},      {"--size", true, false, true},
    {"--qd", true, false, true},      {"--conns", true, false, true},
    {"--iters", true, false, true},   {"--duration", true, false, true},
    {"--warmup", true, false, true},  {"--mode", true, false, true},
    {"--json", true, false, true},
};

const option_spec& find_spec(std::string_view name) {
  for (const option_spec& s : specs)
    if (s.name == name) return s;
  fail("unknown option " + std::string(name));
}

std::uint64_t parse_u64(std::string_view text, std::string_view what) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size())
    fail(std::string(what) + ": not a whole number: \"" + std::string(text) + "\"");
  return v;
}

std::uint64_t parse_in_range(std::string_view text, std::string_view what, std::uint64_t lo,
                             std::uint64_t hi) {
  const std::uint64_t v = parse_u64(text, what);
  if (v < lo || v > hi)
    fail(std::string(what) + " must be in " + std::to_string(lo) + ".." + std::to_string(hi) +
         ", not " + std::string(text));
  return v;
}

// One size: a number with an optional k/K (KiB) or m/M (MiB) suffix, in 1..max_message_size.
std::size_t parse_one_size(std::string_view text) {
  std::string_view digits = text;
  std::uint64_t unit = 1;
  if (!digits.empty() && (digits.back() == 'k' || digits.back() == 'K')) unit = 1024;
  if (!digits.empty() && (digits.back() == 'm' || digits.back() == 'M'))
    unit = std::uint64_t{1024} * 1024;
  if (unit != 1) digits.remove_suffix(1);
  const std::uint64_t n = parse_u64(digits, "--size");
  if (n == 0 || n > max_message_size / unit)
    fail("--size: sizes must be in 1.." + std::to_string(max_message_size) +
         " bytes (the server's region), not " + std::string(text));
  return static_cast<std::size_t>(n * unit);
}

// "64,4k" or "A:B" (A, 2A, 4A, ... up to B) or a mix: "8,64:1k".
std::vector<std::size_t> parse_sizes(std::string_view text) {
  std::vector<std::size_t> out;
  if (text.empty()) fail("--size: empty list");
  while (true) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos) {
      out.push_back(parse_one_size(item));
    } else {
      const std::size_t lo = parse_one_size(item.substr(0, colon));
      const std::size_t hi = parse_one_size(item.substr(colon + 1));
      if (lo > hi) fail("--size: range " + std::string(item) + " goes downwards");
      for (std::size_t s = lo; s <= hi; s *= 2) out.push_back(s);
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

double parse_duration(std::string_view text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(v) ||
      v <= 0 || v > max_duration_s)
    fail("--duration: seconds in (0, " + std::to_string(static_cast<int>(max_duration_s)) +
         "], not \"" + std::string(text) + "\"");
  return v;
}

template <class Enum, std::size_t N>
Enum parse_choice(std::string_view text, std::string_view what,
                  const std::pair<std::string_view, Enum> (&choices)[N]) {
  std::string names;
  for (const auto& [name, value] : choices) {
    if (name == text) return value;
    names += (names.empty() ? "" : "|") + std::string(name);
  }
  fail(std::string(what) + " must be " + names + ", not \"" + std::string(text) + "\"");
}

constexpr std::pair<std::string_view, test_kind> tests[] = {{"lat", test_kind::lat},
                                                            {"bw", test_kind::bw}};
constexpr std::pair<std::string_view, op_kind> ops[] = {{"write", op_kind::write},
                                                        {"read", op_kind::read},
                                                        {"send", op_kind::send},
                                                        {"atomic_write", op_kind::atomic_write},
                                                        {"flush", op_kind::flush}};
constexpr std::pair<std::string_view, poll_mode> modes[] = {{"coroutine", poll_mode::coroutine},
                                                            {"busy-poll", poll_mode::busy_poll}};
constexpr std::pair<std::string_view, provider_choice> providers[] = {
    {"auto", provider_choice::auto_detect},
    {"soft", provider_choice::soft},
    {"verbs", provider_choice::verbs}};

// What was given, before defaults and cross-checks.
struct given {
  std::set<std::string_view> names;
  [[nodiscard]] bool has(std::string_view n) const { return names.contains(n); }
};

void apply(options& o, std::string_view name, std::string_view v) {
  if (name == "--addr") {
    if (v.empty()) fail("--addr: empty address");
    o.addr = std::string(v);
  } else if (name == "--port") {
    o.port = std::to_string(parse_in_range(v, "--port", o.who == role::server ? 0 : 1, 65535));
  } else if (name == "--provider") {
    o.provider = parse_choice(v, "--provider", providers);
  } else if (name == "--once") {
    o.once = true;
  } else if (name == "--clients") {
    o.clients = static_cast<std::uint32_t>(parse_in_range(v, "--clients", 1, 1000000));
  } else if (name == "--test") {
    o.test = parse_choice(v, "--test", tests);
  } else if (name == "--op") {
    o.op = parse_choice(v, "--op", ops);
  } else if (name == "--size") {
    o.sizes = parse_sizes(v);
  } else if (name == "--qd") {
    o.qd = static_cast<std::uint32_t>(parse_in_range(v, "--qd", 1, max_queue_depth));
  } else if (name == "--conns") {
    o.conns = static_cast<std::uint32_t>(parse_in_range(v, "--conns", 1, max_connections));
  } else if (name == "--iters") {
    o.iters = parse_in_range(v, "--iters", 1, max_iterations);
  } else if (name == "--duration") {
    o.duration_s = parse_duration(v);
  } else if (name == "--warmup") {
    o.warmup = parse_in_range(v, "--warmup", 0, max_iterations);
  } else if (name == "--mode") {
    o.mode = parse_choice(v, "--mode", modes);
  } else if (name == "--json") {
    if (v.empty()) fail("--json: empty file name");
    o.json_path = std::string(v);
  }
}

// Defaults that depend on other options, and the rules between options.
void finish_client(options& o, const given& g) {
  if (g.has("--iters") && g.has("--duration")) fail("--iters and --duration exclude each other");
  if (!g.has("--iters") && !g.has("--duration")) o.iters = default_iters;
  if (!g.has("--warmup"))
    o.warmup = o.iters != 0 ? std::min(default_warmup, o.iters) : default_warmup;
  if (o.sizes.empty()) o.sizes = {o.op == op_kind::atomic_write ? atomic_write_size : 64};
  if (o.op == op_kind::atomic_write &&
      std::any_of(o.sizes.begin(), o.sizes.end(),
                  [](std::size_t s) { return s != atomic_write_size; }))
    fail("--op atomic_write moves 8 bytes: --size must be 8");
  if (o.test == test_kind::lat && g.has("--qd") && o.qd != 1)
    fail("--test lat keeps one operation in flight per connection: --qd must be 1 (use --test bw)");
  if (o.test == test_kind::bw && !g.has("--qd")) o.qd = default_bw_qd;
}

void finish_server(options& o, const given& g) {
  if (g.has("--once") && g.has("--clients")) fail("--once and --clients exclude each other");
  if (o.once) o.clients = 1;
}

options parse_options(std::span<const std::string_view> args) {
  options o;
  if (args.empty()) fail("say `server` or `client`");
  if (args[0] == "server")
    o.who = role::server;
  else if (args[0] != "client")
    fail("the first argument must be `server` or `client`, not \"" + std::string(args[0]) + "\"");
  given g;
  for (std::size_t i = 1; i < args.size(); ++i) {
    std::string_view name = args[i];
    std::optional<std::string_view> value;
    if (const std::size_t eq = name.find('=');
        name.starts_with("--") && eq != std::string_view::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const option_spec& spec = find_spec(name);
    if (!(o.who == role::server ? spec.server : spec.client))
      fail(std::string(name) + " is not a " + std::string(args[0]) + " option");
    if (!g.names.insert(spec.name).second) fail(std::string(name) + " given twice");
    if (spec.takes_value && !value) {
      if (i + 1 == args.size()) fail(std::string(name) + " needs a value");
      value = args[++i];
    }
    if (!spec.takes_value && value) fail(std::string(name) + " takes no value");
    apply(o, spec.name, value.value_or(""));
  }
  if (o.who == role::client)
    finish_client(o, g);
  else
    finish_server(o, g);
  return o;
}

}  // namespace

parse_result parse_args(std::span<const std::string_view> args) {
  parse_result r;
  if (std::any_of(args.begin(), args.end(),
                  [](std::string_view a) { return a == "-h" || a == "--help"; })) {
    r.help = true;
    return r;
  }
  try {
    r.opts = parse_options(args);
  } catch (const usage_error& e) {
    r.error = e.what();
  }
  return r;
}

std::string_view to_string(test_kind t) noexcept { return t == test_kind::lat ? "lat" : "bw"; }

std::string_view to_string(op_kind o) noexcept {
  for (const auto& [name, value] : ops)
    if (value == o) return name;
  return "?";
}

std::string_view to_string(poll_mode m) noexcept {
  return m == poll_mode::coroutine ? "coroutine" : "busy-poll";
}

std::string_view to_string(provider_choice p) noexcept {
  for (const auto& [name, value] : providers)
    if (value == p) return name;
  return "?";
}

}  // namespace arpma_perf
