#include "report.hpp"

#include <gtest/gtest.h>

namespace {

using namespace arpma_perf;

TEST(ReportTest, JsonStringsAreEscaped) {
  EXPECT_EQ(json_string("plain"), "\"plain\"");
  EXPECT_EQ(json_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_string("line\nfeed\ttab"), "\"line\\nfeed\\ttab\"");
  EXPECT_EQ(json_string(std::string_view("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(json_string("h\xc3\xa9"), "\"h\xc3\xa9\"");  // UTF-8 passes through
}

run_report sample() {
  run_report r;
  r.opts.addr = "127.0.0.1";
  r.opts.port = "1234";
  r.opts.sizes = {64, 4096};
  r.opts.iters = 100;
  r.provider = "soft";
  histogram h;
  for (std::uint64_t v = 1000; v < 1100; ++v) h.record(v);
  r.results.push_back(summarize(64, h, 0.001, true));
  return r;
}

TEST(ReportTest, JsonHasTheFields) {
  run_report r = sample();
  r.error = "bad \"thing\"";
  const std::string j = to_json(r, "0.1.0");
  for (const char* field :
       {"\"tool\": \"arpma-perf\"", "\"version\": \"0.1.0\"", "\"provider\": \"soft\"",
        "\"test\": \"lat\"", "\"op\": \"write\"", "\"iters\": 100", "\"duration_s\": null",
        "\"sizes\": [64, 4096]", "\"interrupted\": false", "\"error\": \"bad \\\"thing\\\"\"",
        "\"size\": 64", "\"ops\": 100", "\"complete\": true", "\"min\": 1000", "\"max\": 1099",
        "\"p99_9\": "})
    EXPECT_NE(j.find(field), std::string::npos) << field << " in " << j;
  EXPECT_EQ(j.back(), '\n');
}

TEST(ReportTest, EmptyRunIsStillAnObject) {
  run_report r = sample();
  r.results.clear();
  r.interrupted = true;
  const std::string j = to_json(r, "x");
  EXPECT_NE(j.find("\"results\": []"), std::string::npos) << j;
  EXPECT_NE(j.find("\"interrupted\": true"), std::string::npos);
  EXPECT_NE(j.find("\"error\": null"), std::string::npos);
}

TEST(ReportTest, Table) {
  const run_report r = sample();
  const std::string head = table_header(r);
  EXPECT_NE(head.find("write lat, soft provider, 127.0.0.1:1234, 1 connection, qd 1"),
            std::string::npos)
      << head;
  EXPECT_NE(head.find("p99.9"), std::string::npos);
  const std::string row = table_row(r.results[0]);
  EXPECT_NE(row.find("       64         100"), std::string::npos) << row;
  EXPECT_EQ(row.find("cut short"), std::string::npos);
  size_result cut = r.results[0];
  cut.complete = false;
  EXPECT_NE(table_row(cut).find("cut short"), std::string::npos);
}

}  // namespace
