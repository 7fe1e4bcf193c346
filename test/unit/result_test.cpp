// arpma::result<T>: what its documentation promises callers of every
// synchronous C++ call (a value or the error_code, value() on an error throws
// std::system_error carrying that code).
#include "arpma/result.hpp"

#include "arpma/error.hpp"

#include <gtest/gtest.h>

#include <string>
#include <system_error>

namespace result_test {

namespace {

arpma::result<int> parse(const std::string& s) {
  if (s.empty()) return arpma::make_error_code(arpma::errc::invalid_argument);
  return static_cast<int>(s.size());
}

TEST(result_test, holds_a_value_or_the_error_that_explains_why_not) {
  const auto ok = parse("abc");
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok.value(), 3);
  const auto bad = parse("");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), arpma::errc::invalid_argument);
}

TEST(result_test, value_on_an_error_throws_a_system_error_with_its_code) {
  const auto bad = parse("");
  try {
    (void)bad.value();
    ADD_FAILURE() << "value() did not throw";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), arpma::errc::invalid_argument);
  }
}

}  // namespace

}  // namespace result_test
