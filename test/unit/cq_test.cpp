// arpma::cq without a connection (an empty view refuses every call, on the
// handler's own executor) and what cq::poll reports: a provider's work
// completion as arpma::completion (core/completion_of.hpp), so that no C++
// user needs rdma-core's headers.
#include "arpma/cq.hpp"

#include "arpma/completion.hpp"
#include "arpma/error.hpp"
#include "core/completion_of.hpp"
#include "provider/provider.hpp"
#include "support/wait.hpp"

#include <gtest/gtest.h>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>

#include <array>
#include <optional>

namespace cq_test {

namespace {

namespace prov = arpma::provider;

TEST(cq_test, an_empty_view_refuses_to_poll) {
  arpma::cq empty;
  EXPECT_FALSE(empty);
  EXPECT_FALSE(empty.get_executor()) << "no connection, no executor";
  std::array<arpma::completion, 2> out{};
  auto polled = empty.poll(out);
  ASSERT_FALSE(polled);
  EXPECT_EQ(polled.error(), arpma::errc::invalid_argument);
}

TEST(cq_test, an_empty_views_wait_fails_on_the_handlers_executor) {
  boost::asio::io_context io;
  std::optional<std::error_code> got;
  arpma::cq().async_wait(boost::asio::bind_executor(io, [&](std::error_code ec) { got = ec; }));
  EXPECT_FALSE(got) << "never inside the initiating call";
  ASSERT_TRUE(arpma::test::run_until(io, [&] { return got.has_value(); }));
  EXPECT_EQ(*got, arpma::errc::invalid_argument);
}

TEST(cq_test, a_successful_completion_carries_every_field) {
  prov::work_completion wc;
  wc.wr_id = 0x1122334455667788u;
  wc.opcode = prov::wc_opcode::recv_rdma_with_imm;
  wc.byte_len = 64;
  wc.imm_data = 0xdeadbeefu;
  wc.with_imm = true;
  wc.qp_num = 0x123456;
  const arpma::completion c = arpma::detail::completion_of(wc, true);
  EXPECT_EQ(c.wr_id, wc.wr_id);
  EXPECT_FALSE(c.status);
  EXPECT_EQ(c.opcode, arpma::wc_opcode::recv_rdma_with_imm);
  EXPECT_EQ(c.byte_len, 64U);
  EXPECT_EQ(c.imm, 0xdeadbeefu) << "host order, as the provider gives it";
  EXPECT_EQ(c.qp_num, 0x123456U);
  EXPECT_EQ(c.vendor_err, 0U);
}

TEST(cq_test, a_failed_completion_has_its_status_as_a_wc_errc) {
  prov::work_completion wc;
  wc.wr_id = 7;
  wc.status = prov::wc_status::rem_access_err;
  wc.opcode = prov::wc_opcode::rdma_write;
  wc.vendor_err = 0x88;
  const arpma::completion c = arpma::detail::completion_of(wc, true);
  EXPECT_EQ(c.status, arpma::wc_errc::rem_access_err) << c.status.message();
  EXPECT_EQ(c.status, arpma::errc::provider) << "every wc status is a provider error";
  EXPECT_EQ(c.vendor_err, 0x88U);
  EXPECT_FALSE(c.imm) << "no immediate without IBV_WC_WITH_IMM";
}

TEST(cq_test, an_async_operations_completion_hides_arpmas_own_wr_id) {
  prov::work_completion wc;
  wc.wr_id = 0x7fff12345678u;  // the operation's pointer, in the dispatcher
  EXPECT_EQ(arpma::detail::completion_of(wc, false).wr_id, 0U);
}

}  // namespace

}  // namespace cq_test
