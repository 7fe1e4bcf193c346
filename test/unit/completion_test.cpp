// arpma/completion.hpp on its own: it compiles first, and its opcodes are
// ibv_wc_opcode's values (the C API and the verbs provider pass them through).
#include "arpma/completion.hpp"

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

namespace completion_test {

namespace {

TEST(completion, opcodes_are_ibv_wc_opcode_values) {
  EXPECT_EQ(static_cast<int>(arpma::wc_opcode::send), IBV_WC_SEND);
  EXPECT_EQ(static_cast<int>(arpma::wc_opcode::rdma_write), IBV_WC_RDMA_WRITE);
  EXPECT_EQ(static_cast<int>(arpma::wc_opcode::rdma_read), IBV_WC_RDMA_READ);
  EXPECT_EQ(static_cast<int>(arpma::wc_opcode::recv), IBV_WC_RECV);
  EXPECT_EQ(static_cast<int>(arpma::wc_opcode::recv_rdma_with_imm), IBV_WC_RECV_RDMA_WITH_IMM);
}

TEST(completion, a_default_completion_is_an_empty_send_without_immediate_data) {
  const arpma::completion c;
  EXPECT_EQ(c.byte_len, 0U);
  EXPECT_EQ(c.opcode, arpma::wc_opcode::send);
  EXPECT_FALSE(c.imm.has_value());
  EXPECT_EQ(c.qp_num, 0U);
}

}  // namespace

}  // namespace completion_test
