// arpma::errc, error_category() and to_rpma_error(): the error model of
// docs/style.md (Errors).
#include "arpma/error.hpp"

#include <librpma.h>

#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <string>
#include <system_error>
#include <utility>

namespace error_test {

namespace {

using arpma::errc;

constexpr std::array all_errc = {
    errc::unknown,          errc::not_supported,      errc::provider, errc::no_memory,
    errc::invalid_argument, errc::no_completion,      errc::no_event, errc::again,
    errc::shared_channel,   errc::not_shared_channel,
};

// A transport-specific category, like a work-completion status would have.
class wc_status_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "wc_status"; }
  std::string message(int) const override { return "work completion failed"; }
};

const wc_status_category& wc_status() {
  static const wc_status_category instance;
  return instance;
}

TEST(Errc, ValuesAreTheRpmaCodes) {
  EXPECT_EQ(static_cast<int>(errc::unknown), RPMA_E_UNKNOWN);
  EXPECT_EQ(static_cast<int>(errc::not_supported), RPMA_E_NOSUPP);
  EXPECT_EQ(static_cast<int>(errc::provider), RPMA_E_PROVIDER);
  EXPECT_EQ(static_cast<int>(errc::no_memory), RPMA_E_NOMEM);
  EXPECT_EQ(static_cast<int>(errc::invalid_argument), RPMA_E_INVAL);
  EXPECT_EQ(static_cast<int>(errc::no_completion), RPMA_E_NO_COMPLETION);
  EXPECT_EQ(static_cast<int>(errc::no_event), RPMA_E_NO_EVENT);
  EXPECT_EQ(static_cast<int>(errc::again), RPMA_E_AGAIN);
  EXPECT_EQ(static_cast<int>(errc::shared_channel), RPMA_E_SHARED_CHANNEL);
  EXPECT_EQ(static_cast<int>(errc::not_shared_channel), RPMA_E_NOT_SHARED_CHNL);
}

TEST(Errc, IsAnErrorConditionEnum) {
  static_assert(std::is_error_condition_enum_v<errc>);
  static_assert(!std::is_error_code_enum_v<errc>);
  const std::error_condition cond = errc::provider;  // implicit, via make_error_condition
  EXPECT_EQ(cond.category(), arpma::error_category());
  EXPECT_EQ(cond.value(), RPMA_E_PROVIDER);
}

TEST(ErrorCategory, Name) { EXPECT_STREQ(arpma::error_category().name(), "arpma"); }

TEST(ErrorCategory, Messages) {
  const auto& cat = arpma::error_category();
  const std::pair<int, const char*> expected[] = {
      {0, "Success"},
      {RPMA_E_UNKNOWN, "Unknown error"},
      {RPMA_E_NOSUPP, "Not supported"},
      {RPMA_E_PROVIDER, "Provider error occurred"},
      {RPMA_E_NOMEM, "Out of memory"},
      {RPMA_E_INVAL, "Invalid argument"},
      {RPMA_E_NO_COMPLETION, "No next completion available"},
      {RPMA_E_NO_EVENT, "No next event available"},
      {RPMA_E_AGAIN, "Temporary error, try again"},
      {RPMA_E_SHARED_CHANNEL, "Completion channel is shared"},
      {RPMA_E_NOT_SHARED_CHNL, "Completion channel is not shared"},
      {1, "Unknown error"},
      {-1, "Unknown error"},
      {-100010, "Unknown error"},
  };
  for (const auto& [value, text] : expected) EXPECT_EQ(cat.message(value), text) << value;
  EXPECT_EQ(arpma::make_error_code(errc::invalid_argument).message(), "Invalid argument");
}

TEST(MakeErrorCode, CarriesValueAndCategory) {
  for (const errc e : all_errc) {
    const std::error_code ec = arpma::make_error_code(e);
    EXPECT_TRUE(ec);
    EXPECT_EQ(ec.value(), static_cast<int>(e));
    EXPECT_EQ(ec.category(), arpma::error_category());
    const std::error_condition cond = arpma::make_error_condition(e);
    EXPECT_EQ(cond.value(), static_cast<int>(e));
    EXPECT_EQ(cond.category(), arpma::error_category());
  }
}

TEST(Equivalence, ArpmaCodeEqualsItsOwnConditionOnly) {
  for (const errc code : all_errc) {
    const std::error_code ec = arpma::make_error_code(code);
    for (const errc cond : all_errc) {
      if (code == cond)
        EXPECT_TRUE(ec == cond) << static_cast<int>(code);
      else
        EXPECT_FALSE(ec == cond) << static_cast<int>(code) << " vs " << static_cast<int>(cond);
    }
  }
}

TEST(Equivalence, SystemErrnoIsProvider) {
  const std::error_code ec(ENODEV, std::system_category());
  EXPECT_TRUE(ec == errc::provider);
  EXPECT_FALSE(ec == errc::invalid_argument);
  EXPECT_FALSE(ec == errc::unknown);
  // The precise cause survives.
  EXPECT_EQ(ec.value(), ENODEV);
  EXPECT_TRUE(ec == std::errc::no_such_device);
}

TEST(Equivalence, GenericErrnoIsProvider) {
  const std::error_code ec(ETIMEDOUT, std::generic_category());
  EXPECT_TRUE(ec == errc::provider);
  EXPECT_TRUE(std::make_error_code(std::errc::timed_out) == errc::provider);
  EXPECT_TRUE(std::error_code(ENOMEM, std::system_category()) == errc::provider);
}

TEST(Equivalence, OtherTransportCategoryIsProvider) {
  const std::error_code ec(12, wc_status());
  EXPECT_TRUE(ec == errc::provider);
  EXPECT_FALSE(ec == errc::unknown);
}

TEST(Equivalence, CancellationIsNotProvider) {
  EXPECT_FALSE(std::error_code(ECANCELED, std::system_category()) == errc::provider);
  EXPECT_FALSE(std::error_code(ECANCELED, std::generic_category()) == errc::provider);
  const boost::system::error_code aborted = boost::asio::error::operation_aborted;
  const std::error_code converted = aborted;
  EXPECT_TRUE(converted);
  EXPECT_FALSE(converted == errc::provider);
}

TEST(Equivalence, SuccessIsNoCondition) {
  const std::error_code ok;
  for (const errc e : all_errc) EXPECT_FALSE(ok == e) << static_cast<int>(e);
}

TEST(ToRpmaError, Success) {
  EXPECT_EQ(arpma::to_rpma_error(std::error_code()), 0);
  EXPECT_EQ(arpma::to_rpma_error(std::error_code(0, std::generic_category())), 0);
}

TEST(ToRpmaError, ArpmaCodesKeepTheirValue) {
  for (const errc e : all_errc)
    EXPECT_EQ(arpma::to_rpma_error(arpma::make_error_code(e)), static_cast<int>(e));
}

TEST(ToRpmaError, ErrnoCodesAreProvider) {
  EXPECT_EQ(arpma::to_rpma_error(std::error_code(ENODEV, std::system_category())), RPMA_E_PROVIDER);
  EXPECT_EQ(arpma::to_rpma_error(std::error_code(ETIMEDOUT, std::generic_category())),
            RPMA_E_PROVIDER);
  EXPECT_EQ(arpma::to_rpma_error(std::error_code(ENOMEM, std::system_category())), RPMA_E_PROVIDER);
  EXPECT_EQ(arpma::to_rpma_error(std::error_code(12, wc_status())), RPMA_E_PROVIDER);
}

TEST(ToRpmaError, CancellationIsUnknown) {
  EXPECT_EQ(arpma::to_rpma_error(std::error_code(ECANCELED, std::system_category())),
            RPMA_E_UNKNOWN);
  EXPECT_EQ(arpma::to_rpma_error(std::error_code(ECANCELED, std::generic_category())),
            RPMA_E_UNKNOWN);
  const boost::system::error_code aborted = boost::asio::error::operation_aborted;
  EXPECT_EQ(arpma::to_rpma_error(aborted), RPMA_E_UNKNOWN);
}

}  // namespace

}  // namespace error_test
