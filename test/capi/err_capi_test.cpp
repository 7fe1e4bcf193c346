// rpma_err_2str and rpma_utils_conn_event_2str: librpma 1.3's strings.
#include <librpma.h>

#include <gtest/gtest.h>

#include <climits>
#include <utility>

namespace err_capi_test {

namespace {

TEST(Err2Str, EveryCode) {
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
  };
  for (const auto& [value, text] : expected) EXPECT_STREQ(rpma_err_2str(value), text) << value;
}

TEST(Err2Str, UnknownValues) {
  for (const int value :
       {1, -1, RPMA_E_UNKNOWN + 1, RPMA_E_NOT_SHARED_CHNL - 1, -22, 22, INT_MIN, INT_MAX})
    EXPECT_STREQ(rpma_err_2str(value), "Unknown error") << value;
}

TEST(Err2Str, StaticStrings) {
  // The same storage every time: the caller never frees it.
  EXPECT_EQ(rpma_err_2str(RPMA_E_INVAL), rpma_err_2str(RPMA_E_INVAL));
  EXPECT_EQ(rpma_err_2str(0), rpma_err_2str(0));
}

TEST(ConnEvent2Str, EveryEvent) {
  const std::pair<rpma_conn_event, const char*> expected[] = {
      {RPMA_CONN_UNDEFINED, "Undefined connection event"},
      {RPMA_CONN_ESTABLISHED, "Connection established"},
      {RPMA_CONN_CLOSED, "Connection closed"},
      {RPMA_CONN_LOST, "Connection lost"},
      {RPMA_CONN_REJECTED, "Connection rejected"},
      {RPMA_CONN_UNREACHABLE, "Connection unreachable"},
  };
  for (const auto& [event, text] : expected)
    EXPECT_STREQ(rpma_utils_conn_event_2str(event), text) << event;
}

TEST(ConnEvent2Str, UnknownEvents) {
  // C++ code may only form values within the enum's range (-8..7);
  // capi_args.c passes arbitrary ints the way C programs can.
  for (const int value : {-2, 5, 6, 7, -8})
    EXPECT_STREQ(rpma_utils_conn_event_2str(static_cast<rpma_conn_event>(value)),
                 "Unsupported connection event")
        << value;
}

}  // namespace

}  // namespace err_capi_test
