#include "args.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string_view>
#include <vector>

namespace {

using namespace arpma_perf;

parse_result parse(std::initializer_list<std::string_view> args) {
  const std::vector<std::string_view> v(args);
  return parse_args(v);
}

// The error for `args`, expecting one.
std::string error_of(std::initializer_list<std::string_view> args) {
  const parse_result r = parse(args);
  EXPECT_FALSE(r.opts.has_value());
  EXPECT_FALSE(r.help);
  EXPECT_FALSE(r.error.empty());
  return r.error;
}

TEST(ArgsTest, ClientDefaults) {
  const parse_result r = parse({"client"});
  ASSERT_TRUE(r.opts) << r.error;
  const options& o = *r.opts;
  EXPECT_EQ(o.who, role::client);
  EXPECT_EQ(o.addr, "127.0.0.1");
  EXPECT_EQ(o.port, "18515");
  EXPECT_EQ(o.test, test_kind::lat);
  EXPECT_EQ(o.op, op_kind::write);
  EXPECT_EQ(o.sizes, std::vector<std::size_t>{64});
  EXPECT_EQ(o.qd, 1u);
  EXPECT_EQ(o.conns, 1u);
  EXPECT_EQ(o.iters, 10000u);
  EXPECT_EQ(o.duration_s, 0.0);
  EXPECT_EQ(o.warmup, 100u);
  EXPECT_EQ(o.mode, poll_mode::coroutine);
  EXPECT_EQ(o.provider, provider_choice::auto_detect);
  EXPECT_TRUE(o.json_path.empty());
}

TEST(ArgsTest, ClientEverythingBothSpellings) {
  const parse_result r =
      parse({"client",    "--addr",    "10.0.0.2",   "--port=7000", "--provider", "verbs",
             "--test=bw", "--op",      "read",       "--size",      "8,4k,1M",    "--qd",
             "32",        "--conns=4", "--duration", "2.5",         "--warmup",   "0",
             "--mode",    "busy-poll", "--json",     "out.json"});
  ASSERT_TRUE(r.opts) << r.error;
  const options& o = *r.opts;
  EXPECT_EQ(o.addr, "10.0.0.2");
  EXPECT_EQ(o.port, "7000");
  EXPECT_EQ(o.provider, provider_choice::verbs);
  EXPECT_EQ(o.test, test_kind::bw);
  EXPECT_EQ(o.op, op_kind::read);
  EXPECT_EQ(o.sizes, (std::vector<std::size_t>{8, 4096, 1 << 20}));
  EXPECT_EQ(o.qd, 32u);
  EXPECT_EQ(o.conns, 4u);
  EXPECT_EQ(o.iters, 0u);
  EXPECT_DOUBLE_EQ(o.duration_s, 2.5);
  EXPECT_EQ(o.warmup, 0u);
  EXPECT_EQ(o.mode, poll_mode::busy_poll);
  EXPECT_EQ(o.json_path, "out.json");
}

TEST(ArgsTest, SizeRangesArePowersOfTwoUpToTheEnd) {
  auto r = parse({"client", "--size", "64:1k"});
  ASSERT_TRUE(r.opts) << r.error;
  EXPECT_EQ(r.opts->sizes, (std::vector<std::size_t>{64, 128, 256, 512, 1024}));
  r = parse({"client", "--size", "3:20,100"});
  ASSERT_TRUE(r.opts) << r.error;
  EXPECT_EQ(r.opts->sizes, (std::vector<std::size_t>{3, 6, 12, 100}));
  r = parse({"client", "--size", "16M"});
  ASSERT_TRUE(r.opts) << r.error;
  EXPECT_EQ(r.opts->sizes, std::vector<std::size_t>{max_message_size});
}

TEST(ArgsTest, TestDependentDefaults) {
  auto r = parse({"client", "--test", "bw"});
  ASSERT_TRUE(r.opts) << r.error;
  EXPECT_EQ(r.opts->qd, 16u);
  r = parse({"client", "--op", "atomic_write"});
  ASSERT_TRUE(r.opts) << r.error;
  EXPECT_EQ(r.opts->sizes, std::vector<std::size_t>{8});
  r = parse({"client", "--iters", "5"});
  ASSERT_TRUE(r.opts) << r.error;
  EXPECT_EQ(r.opts->warmup, 5u);  // at most --iters
  r = parse({"client", "--test", "lat", "--qd", "1"});
  EXPECT_TRUE(r.opts) << r.error;
}

TEST(ArgsTest, Server) {
  auto r = parse({"server", "--port", "0", "--once"});
  ASSERT_TRUE(r.opts) << r.error;
  EXPECT_EQ(r.opts->who, role::server);
  EXPECT_EQ(r.opts->port, "0");
  EXPECT_EQ(r.opts->clients, 1u);
  r = parse({"server", "--clients", "3", "--provider", "soft"});
  ASSERT_TRUE(r.opts) << r.error;
  EXPECT_EQ(r.opts->clients, 3u);
  EXPECT_EQ(r.opts->provider, provider_choice::soft);
  r = parse({"server"});
  ASSERT_TRUE(r.opts) << r.error;
  EXPECT_EQ(r.opts->clients, 0u);
}

TEST(ArgsTest, Help) {
  EXPECT_TRUE(parse({"--help"}).help);
  EXPECT_TRUE(parse({"client", "--qd", "0", "-h"}).help);
  EXPECT_NE(usage_text().find("arpma-perf client"), std::string::npos);
}

TEST(ArgsTest, BadRoleAndOptions) {
  EXPECT_NE(error_of({}).find("server"), std::string::npos);
  EXPECT_NE(error_of({"serve"}).find("serve"), std::string::npos);
  EXPECT_NE(error_of({"client", "--bogus"}).find("unknown option --bogus"), std::string::npos);
  EXPECT_NE(error_of({"client", "extra"}).find("unknown option extra"), std::string::npos);
  EXPECT_NE(error_of({"client", "--qd"}).find("needs a value"), std::string::npos);
  EXPECT_NE(error_of({"server", "--once=yes"}).find("takes no value"), std::string::npos);
  EXPECT_NE(error_of({"client", "--qd", "2", "--qd", "4"}).find("twice"), std::string::npos);
  EXPECT_NE(error_of({"server", "--op", "write"}).find("not a server option"), std::string::npos);
  EXPECT_NE(error_of({"client", "--once"}).find("not a client option"), std::string::npos);
}

TEST(ArgsTest, BadValues) {
  error_of({"client", "--test", "latency"});
  error_of({"client", "--op", "cas"});
  error_of({"client", "--mode", "poll"});
  error_of({"client", "--provider", "rxe"});
  error_of({"client", "--addr", ""});
  error_of({"client", "--json", ""});
  error_of({"client", "--port", "0"});
  error_of({"client", "--port", "65536"});
  error_of({"server", "--port", "-1"});
  error_of({"client", "--test", "bw", "--qd", "0"});
  error_of({"client", "--test", "bw", "--qd", "257"});
  error_of({"client", "--conns", "0"});
  error_of({"client", "--conns", "65"});
  error_of({"client", "--iters", "0"});
  error_of({"client", "--iters", "12x"});
  error_of({"client", "--iters", "99999999999999999999999"});
  error_of({"client", "--duration", "0"});
  error_of({"client", "--duration", "-1"});
  error_of({"client", "--duration", "nan"});
  error_of({"client", "--duration", "1e9"});
  error_of({"client", "--warmup", "x"});
  error_of({"server", "--clients", "0"});
}

TEST(ArgsTest, BadSizes) {
  EXPECT_NE(error_of({"client", "--size", "0"}).find("1..16777216"), std::string::npos);
  error_of({"client", "--size", "16777217"});
  error_of({"client", "--size", "17M"});
  error_of({"client", "--size", ""});
  error_of({"client", "--size", "64,"});
  error_of({"client", "--size", "k"});
  error_of({"client", "--size", "4g"});
  error_of({"client", "--size", "1k:64"});
  error_of({"client", "--size", "1:2:4"});
}

TEST(ArgsTest, BadCombinations) {
  EXPECT_NE(error_of({"client", "--op", "atomic_write", "--size", "16"}).find("must be 8"),
            std::string::npos);
  error_of({"client", "--op", "atomic_write", "--size", "8,64"});
  EXPECT_NE(error_of({"client", "--qd", "4"}).find("--qd must be 1"), std::string::npos);
  error_of({"client", "--iters", "10", "--duration", "1"});
  error_of({"server", "--once", "--clients", "2"});
}

}  // namespace
