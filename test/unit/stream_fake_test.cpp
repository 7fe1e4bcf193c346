// arpma::stream's engine against the scripted provider, with the test as the
// peer: every message the stream sends is inspected (payload, immediate) and
// every message it receives is made by hand, so framing, credits, the
// receive ring wrapping around, cancellation, close and protocol errors are
// checked one message at a time. No threads, no sleeps, no sockets.
#include "arpma/stream.hpp"

#include "arpma/endpoint.hpp"
#include "arpma/error.hpp"
#include "core/stream_state.hpp"
#include "fake/fake_provider.hpp"
#include "support/wait.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace stream_fake_test {

namespace asio = boost::asio;
namespace prov = arpma::provider;
using arpma::detail::stream_imm;
using arpma::test::fake_provider;

namespace {

/// What a read or write completed with; empty while it pends.
struct io_result {
  std::optional<arpma::error_code> ec;
  std::size_t n = 0;
  [[nodiscard]] bool done() const { return ec.has_value(); }
  auto handler() {
    return [this](arpma::error_code e, std::size_t k) {
      ec = e;
      n = k;
    };
  }
};

/// The far side's bookkeeping, as a correct peer keeps it: the credits it
/// holds, what it owes back (it reads every message at once) and how many of
/// the stream's control messages it has taken (its ack).
struct peer_model {
  std::uint32_t credits = 0;
  std::uint32_t owed = 0;
  std::uint32_t controls_seen = 0;
  std::string received;
  bool fin = false;
};

class stream_fake : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = arpma::peer::create(fake.device());
    ASSERT_TRUE(p) << p.error().message();
    peer.emplace(std::move(p).value());
    mine.slots = 4;
    mine.control_slots = 2;
    mine.slot_size = 64;
    theirs = mine;
  }
  void TearDown() override {
    s = arpma::stream();  // an orderly close lingers until its FIN is delivered
    if (id != nullptr) (void)fake.flush(id);
    if (io) (void)run([&] { return fake.live_objects() <= 2; });  // the PD and its peer
    peer.reset();
    io.reset();
    EXPECT_THAT(fake.violations(), ::testing::IsEmpty());
    EXPECT_EQ(fake.live_objects(), 0U) << "provider objects leaked";
  }

  /// A stream to a peer shaped `theirs`.
  void connect() {
    const auto hello = arpma::detail::encode_hello(theirs);
    fake.on_connect({{prov::cm_event_type::established, 0, {}, {hello.begin(), hello.end()}}});
    std::optional<arpma::error_code> got;
    arpma::async_connect_stream(io->get_executor(), *peer, "192.0.2.1", "7204", mine,
                                [&](arpma::error_code ec, arpma::stream st) {
                                  got = ec;
                                  s = std::move(st);
                                });
    ASSERT_TRUE(run([&] { return got.has_value(); }));
    ASSERT_FALSE(*got) << got->message();
    for (auto* i : fake.ids())
      if (fake.qp_of(i)) id = i;
    ASSERT_NE(id, nullptr);
    model.credits = mine.slots;
  }

  template <class Done>
  [[nodiscard]] bool run(Done done) {
    return arpma::test::run_until(*io, done, std::chrono::seconds(5));
  }
  void settle() { arpma::test::settle(*io); }

  [[nodiscard]] std::vector<fake_provider::posted_wr> sends() const {
    std::vector<fake_provider::posted_wr> out;
    for (const auto& p : fake.outstanding(id))
      if (!p.receive) out.push_back(p);
    return out;
  }
  [[nodiscard]] std::vector<std::uint64_t> receives() const {
    std::vector<std::uint64_t> out;
    for (const auto& p : fake.outstanding(id))
      if (p.receive) out.push_back(p.recv.wr_id);
    return out;
  }
  /// Delivers every send posted so far to the peer model and completes it.
  std::vector<fake_provider::posted_wr> take_sends() {
    auto out = sends();
    for (const auto& p : out) {
      EXPECT_EQ(p.send.opcode, prov::wr_opcode::send_with_imm);
      const std::uint32_t imm = p.send.imm;
      EXPECT_EQ(imm & stream_imm::reserved, 0U);
      model.credits += imm & stream_imm::credits_mask;
      if ((imm & stream_imm::control) != 0) {
        EXPECT_EQ(p.send.local.length, 0U) << "a control message carries no data";
        ++model.controls_seen;
      } else {
        const auto bytes = fake_provider::payload(p);
        model.received.append(bytes.begin(), bytes.end());
        ++model.owed;
      }
      if ((imm & stream_imm::fin) != 0) model.fin = true;
      EXPECT_TRUE(fake.complete(id, p.wr_id()));
    }
    settle();
    return out;
  }
  /// A message from a correct peer: its owed credits and its ack ride along.
  void from_peer(const std::string& data, std::uint32_t flags = 0) {
    const bool control = (flags & stream_imm::control) != 0;
    if (!control) {
      ASSERT_GT(model.credits, 0U) << "the stream left its peer without credit";
      --model.credits;
    }
    const std::uint32_t imm = std::min(model.owed, stream_imm::credits_mask) |
                              ((model.controls_seen & 0xffU) << stream_imm::ack_shift) | flags;
    model.owed = 0;
    ASSERT_TRUE(fake.receive(id, as_bytes(data), imm)) << "no receive posted";
    settle();
  }
  static std::vector<std::uint8_t> as_bytes(const std::string& data) {
    return {data.begin(), data.end()};
  }
  void write(const std::string& data, io_result& out) {
    s.async_write_some(asio::buffer(data), out.handler());
  }
  void read(std::string& into, io_result& out) {
    s.async_read_some(asio::buffer(into), out.handler());
  }
  [[nodiscard]] bool disconnected() const {
    const auto calls = fake.calls();
    return std::find(calls.begin(), calls.end(), "disconnect") != calls.end();
  }

  fake_provider fake;
  prov::scoped_override use_fake{fake};
  std::unique_ptr<asio::io_context> io = std::make_unique<asio::io_context>();
  std::optional<arpma::peer> peer;
  arpma::stream_cfg mine;
  arpma::stream_cfg theirs;
  arpma::stream s;
  prov::cm_id* id = nullptr;
  peer_model model;
};

TEST_F(stream_fake, every_receive_is_posted_before_the_connection_is_made) {
  ASSERT_NO_FATAL_FAILURE(connect());
  const auto calls = fake.calls();
  const auto connect_at = std::find(calls.begin(), calls.end(), "connect");
  ASSERT_NE(connect_at, calls.end());
  EXPECT_EQ(std::count(calls.begin(), connect_at, "post_recv"), 6) << "N + C, all before";
  EXPECT_THAT(receives(), ::testing::ElementsAre(0, 1, 2, 3, 4, 5));
  const auto sent = fake.sent_data();
  ASSERT_FALSE(sent.empty());
  const auto hello = arpma::detail::decode_hello(sent.back().private_data);
  ASSERT_TRUE(hello) << "the greeting rides on connect";
  EXPECT_EQ(hello->slots, 4U);
  EXPECT_EQ(hello->control_slots, 2U);
  EXPECT_EQ(hello->slot_size, 64U);
}

TEST_F(stream_fake, a_device_without_immediate_data_refuses_streams_before_any_call) {
  prov::device_caps iwarp;
  iwarp.immediate_data = false;
  fake.set_caps(iwarp);
  const auto before = fake.calls().size();
  std::vector<arpma::error_code> got;
  arpma::async_connect_stream(io->get_executor(), *peer, "192.0.2.1", "7204", mine,
                              [&](arpma::error_code ec, arpma::stream st) {
                                got.push_back(ec);
                                EXPECT_FALSE(st);
                              });
  auto ep = arpma::endpoint::listen(io->get_executor(), *peer, "127.0.0.1", "0");
  ASSERT_TRUE(ep) << ep.error().message();
  arpma::async_accept_stream(ep.value(), *peer, mine, [&](arpma::error_code ec, arpma::stream st) {
    got.push_back(ec);
    EXPECT_FALSE(st);
  });
  ASSERT_TRUE(run([&] { return got.size() == 2; }));
  EXPECT_EQ(got[0], arpma::errc::not_supported);
  EXPECT_EQ(got[1], arpma::errc::not_supported);
  const auto calls = fake.calls();
  EXPECT_EQ(std::count(calls.begin() + static_cast<std::ptrdiff_t>(before), calls.end(), "reg_mr"),
            0)
      << "nothing registered";
}

TEST_F(stream_fake, a_write_is_one_send_with_immediate_of_the_bytes_alone) {
  ASSERT_NO_FATAL_FAILURE(connect());
  io_result w;
  write("hello", w);
  EXPECT_FALSE(w.done()) << "never inside the initiating function";
  settle();
  ASSERT_TRUE(w.done());
  EXPECT_FALSE(*w.ec) << w.ec->message();
  EXPECT_EQ(w.n, 5U);
  const auto out = take_sends();
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out[0].send.imm, 0U) << "no credit owed, nothing acknowledged, no flag";
  EXPECT_EQ(model.received, "hello");
}

TEST_F(stream_fake, a_write_is_cut_into_messages_of_the_peers_slot_size) {
  theirs.slot_size = 16;
  ASSERT_NO_FATAL_FAILURE(connect());
  const std::string data(40, 'x');
  io_result w;
  write(data, w);
  settle();
  ASSERT_TRUE(w.done());
  EXPECT_EQ(w.n, 40U);
  const auto out = take_sends();
  ASSERT_EQ(out.size(), 3U);
  EXPECT_EQ(out[0].send.local.length, 16U);
  EXPECT_EQ(out[1].send.local.length, 16U);
  EXPECT_EQ(out[2].send.local.length, 8U);
  EXPECT_EQ(model.received, data);
}

TEST_F(stream_fake, a_stalled_reader_stops_the_writer_at_its_credits_until_one_comes_back) {
  theirs.slots = 2;
  ASSERT_NO_FATAL_FAILURE(connect());
  const std::string data(200, 'a');
  io_result w1;
  write(data, w1);
  settle();
  ASSERT_TRUE(w1.done());
  EXPECT_EQ(w1.n, 128U) << "two credits: two slots of 64";
  ASSERT_EQ(sends().size(), 2U);
  for (const auto& p : sends()) ASSERT_TRUE(fake.complete(id, p.wr_id()));
  io_result w2;
  write(data, w2);
  settle();
  EXPECT_FALSE(w2.done()) << "free slots, but no credit: the writer waits";
  EXPECT_TRUE(sends().empty());
  // The peer read one message and says so in a control message.
  model.credits = 0;
  model.owed = 0;
  ASSERT_TRUE(fake.receive(id, {}, stream_imm::control | 1U));
  ASSERT_TRUE(run([&] { return w2.done(); }));
  EXPECT_FALSE(*w2.ec) << w2.ec->message();
  EXPECT_EQ(w2.n, 64U);
  EXPECT_EQ(sends().size(), 1U);
}

TEST_F(stream_fake, received_bytes_are_read_in_order_across_messages_and_slots_go_back) {
  ASSERT_NO_FATAL_FAILURE(connect());
  from_peer("abc");
  from_peer("defg");
  std::string buf(5, '\0');
  io_result r1;
  read(buf, r1);
  settle();
  ASSERT_TRUE(r1.done());
  EXPECT_EQ(r1.n, 5U);
  EXPECT_EQ(buf, "abcde");
  EXPECT_THAT(receives(), ::testing::ElementsAre(2, 3, 4, 5, 0)) << "the first slot, read out";
  io_result r2;
  read(buf, r2);
  settle();
  ASSERT_TRUE(r2.done());
  EXPECT_EQ(buf.substr(0, r2.n), "fg");
  EXPECT_THAT(receives(), ::testing::ElementsAre(2, 3, 4, 5, 0, 1));
  // Two credits owed (half the window): they go back on a control message.
  const auto out = take_sends();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].send.imm & stream_imm::control, stream_imm::control);
  EXPECT_EQ(model.credits, 4U) << "every credit the peer spent came back";
}

TEST_F(stream_fake, a_long_exchange_wraps_the_rings_and_never_leaves_the_peer_without_credit) {
  ASSERT_NO_FATAL_FAILURE(connect());
  std::string sent_by_peer;
  std::string read_back;
  std::string written;
  std::set<std::uint64_t> receive_slots;
  for (int i = 0; i < 60; ++i) {
    const std::string msg = "m" + std::to_string(i) + ";";
    for (const auto r : receives()) receive_slots.insert(r);
    ASSERT_NO_FATAL_FAILURE(from_peer(msg));
    sent_by_peer += msg;
    std::string buf(64, '\0');
    io_result r;
    read(buf, r);
    ASSERT_TRUE(run([&] { return r.done(); }));
    ASSERT_FALSE(*r.ec) << r.ec->message();
    read_back += buf.substr(0, r.n);
    if (i % 3 == 0) {
      const std::string out = "w" + std::to_string(i) + ";";
      io_result w;
      write(out, w);
      ASSERT_TRUE(run([&] { return w.done(); }));
      ASSERT_FALSE(*w.ec) << w.ec->message();
      written += out;
    }
    (void)take_sends();
    // What the peer does with each message: ours read out, credits back.
    if (model.owed >= 2) {
      ASSERT_NO_FATAL_FAILURE(from_peer("", stream_imm::control));
    }
  }
  EXPECT_EQ(read_back, sent_by_peer);
  EXPECT_EQ(model.received, written);
  EXPECT_EQ(receive_slots.size(), 6U) << "every receive slot went round";
  EXPECT_EQ(receives().size(), 6U) << "all receives posted again";
}

TEST_F(stream_fake, cancelling_a_pending_read_or_write_consumes_and_sends_nothing) {
  theirs.slots = 1;
  ASSERT_NO_FATAL_FAILURE(connect());
  io_result w0;
  write("x", w0);  // takes the only credit
  settle();
  ASSERT_TRUE(w0.done());
  asio::cancellation_signal cancel_read;
  asio::cancellation_signal cancel_write;
  std::string buf(8, '\0');
  io_result r;
  io_result w;
  s.async_read_some(asio::buffer(buf),
                    asio::bind_cancellation_slot(cancel_read.slot(), r.handler()));
  s.async_write_some(asio::buffer(std::string("y")),
                     asio::bind_cancellation_slot(cancel_write.slot(), w.handler()));
  settle();
  ASSERT_FALSE(r.done());
  ASSERT_FALSE(w.done());
  cancel_read.emit(asio::cancellation_type::terminal);
  cancel_write.emit(asio::cancellation_type::partial);
  settle();
  ASSERT_TRUE(r.done());
  ASSERT_TRUE(w.done());
  EXPECT_EQ(*r.ec, asio::error::operation_aborted);
  EXPECT_EQ(*w.ec, asio::error::operation_aborted);
  EXPECT_EQ(r.n + w.n, 0U);
  EXPECT_EQ(sends().size(), 1U) << "only the first write's message";
  // Nothing was consumed: the next read gets the next byte.
  from_peer("z");
  io_result r2;
  read(buf, r2);
  settle();
  ASSERT_TRUE(r2.done());
  EXPECT_EQ(buf.substr(0, r2.n), "z");
}

TEST_F(stream_fake, a_second_pending_read_completes_at_once_with_in_progress) {
  ASSERT_NO_FATAL_FAILURE(connect());
  std::string buf(8, '\0');
  io_result r1;
  io_result r2;
  read(buf, r1);
  read(buf, r2);
  EXPECT_FALSE(r2.done()) << "posted, not called inside the initiating function";
  settle();
  ASSERT_TRUE(r2.done());
  EXPECT_EQ(*r2.ec, asio::error::in_progress);
  EXPECT_FALSE(r1.done()) << "the first one still waits";
  s.close();
  settle();
  ASSERT_TRUE(r1.done());
  EXPECT_EQ(*r1.ec, asio::error::operation_aborted);
}

TEST_F(stream_fake, close_with_everything_read_aborts_what_pends_and_sends_fin_then_disconnects) {
  theirs.slots = 1;
  ASSERT_NO_FATAL_FAILURE(connect());
  io_result w0;
  write("sent", w0);  // takes the only credit: the next write waits
  settle();
  ASSERT_TRUE(w0.done());
  std::string buf(8, '\0');
  io_result r;
  io_result w;
  read(buf, r);
  write("never", w);
  settle();
  ASSERT_FALSE(r.done());
  ASSERT_FALSE(w.done());
  s.close();
  settle();
  ASSERT_TRUE(r.done());
  ASSERT_TRUE(w.done());
  EXPECT_EQ(*r.ec, asio::error::operation_aborted);
  EXPECT_EQ(*w.ec, asio::error::operation_aborted);
  const auto out = sends();
  ASSERT_EQ(out.size(), 2U);
  EXPECT_EQ(out[1].send.imm & (stream_imm::fin | stream_imm::control),
            stream_imm::fin | stream_imm::control)
      << "FIN on a control message: no data credit needed";
  EXPECT_FALSE(disconnected()) << "lingers until the FIN is delivered";
  (void)take_sends();
  EXPECT_TRUE(model.fin);
  EXPECT_EQ(model.received, "sent") << "the aborted write sent nothing";
  ASSERT_TRUE(run([&] { return disconnected(); }));
}

TEST_F(stream_fake, close_with_bytes_unread_resets_without_fin) {
  ASSERT_NO_FATAL_FAILURE(connect());
  from_peer("unread");
  s.close();
  settle();
  EXPECT_TRUE(sends().empty()) << "no FIN: the peer must not take this for an orderly end";
  EXPECT_TRUE(disconnected());
}

TEST_F(stream_fake, fin_from_the_peer_is_eof_after_its_last_byte) {
  ASSERT_NO_FATAL_FAILURE(connect());
  from_peer("last", stream_imm::fin);
  std::string buf(8, '\0');
  io_result r1;
  read(buf, r1);
  settle();
  ASSERT_TRUE(r1.done());
  EXPECT_EQ(buf.substr(0, r1.n), "last");
  io_result r2;
  read(buf, r2);
  settle();
  ASSERT_TRUE(r2.done());
  EXPECT_EQ(*r2.ec, asio::error::eof);
  io_result w;
  write("still open", w);
  settle();
  ASSERT_TRUE(w.done());
  EXPECT_FALSE(*w.ec) << "half-close: this side still writes";
}

TEST_F(stream_fake, a_destroyed_io_context_destroys_the_pending_handlers_uncalled) {
  ASSERT_NO_FATAL_FAILURE(connect());
  auto token = std::make_shared<int>(0);
  const std::weak_ptr<int> alive = token;
  int calls = 0;
  std::string buf(8, '\0');
  s.async_read_some(asio::buffer(buf),
                    [&calls, t = std::move(token)](arpma::error_code, std::size_t) { ++calls; });
  settle();
  io.reset();
  EXPECT_TRUE(alive.expired()) << "the handler went with its io_context";
  EXPECT_EQ(calls, 0);
  ASSERT_TRUE(fake.receive(id, as_bytes("late"), 0U));  // nobody to tell, nothing touched
  s = arpma::stream();
  EXPECT_EQ(calls, 0);
}

// A peer that breaks the protocol: the pending read ends with a reset and
// the connection is disconnected, so the peer hears of it.
struct broken_message {
  const char* what;
  std::string payload;
  std::optional<std::uint32_t> imm;
  int before = 0;  ///< well-formed data messages sent first, none read
};

class stream_fake_hostile : public stream_fake,
                            public ::testing::WithParamInterface<broken_message> {};

TEST_P(stream_fake_hostile, resets_the_stream) {
  ASSERT_NO_FATAL_FAILURE(connect());
  const auto& bad = GetParam();
  for (int i = 0; i < bad.before; ++i) ASSERT_TRUE(fake.receive(id, as_bytes("d"), 0U));
  std::string buf(8, '\0');
  std::string got;
  io_result r;
  ASSERT_TRUE(fake.receive(id, as_bytes(bad.payload), bad.imm));
  // Bytes that arrived before the break are read first, then the reset.
  for (int i = 0; i <= bad.before; ++i) {
    r = io_result();
    read(buf, r);
    ASSERT_TRUE(run([&] { return r.done(); }));
    if (*r.ec) break;
    got += buf.substr(0, r.n);
  }
  EXPECT_EQ(*r.ec, asio::error::connection_reset) << bad.what << ": " << r.ec->message();
  EXPECT_EQ(got, std::string(static_cast<std::size_t>(bad.before), 'd')) << bad.what;
  EXPECT_TRUE(disconnected()) << bad.what;
}

INSTANTIATE_TEST_SUITE_P(
    messages, stream_fake_hostile,
    ::testing::Values(broken_message{"no immediate", "x", std::nullopt},
                      broken_message{"a reserved bit", "x", 1U << 20},
                      broken_message{"a control message with data", "x", stream_imm::control},
                      broken_message{"more credit than was spent", "x", 1U},
                      broken_message{"larger than a slot", std::string(65, 'x'), 0U},
                      broken_message{"data beyond its credits", "x", 0U, 4}));

TEST_F(stream_fake, data_after_the_peers_fin_disconnects_and_the_reader_still_sees_eof) {
  ASSERT_NO_FATAL_FAILURE(connect());
  ASSERT_TRUE(fake.receive(id, as_bytes("end"), stream_imm::fin));
  ASSERT_TRUE(fake.receive(id, as_bytes("more"), 0U));
  std::string buf(8, '\0');
  io_result r1;
  read(buf, r1);
  ASSERT_TRUE(run([&] { return r1.done(); }));
  EXPECT_EQ(buf.substr(0, r1.n), "end");
  io_result r2;
  read(buf, r2);
  ASSERT_TRUE(run([&] { return r2.done(); }));
  EXPECT_EQ(*r2.ec, asio::error::eof) << "everything before the FIN was read";
  EXPECT_TRUE(disconnected());
}

}  // namespace

}  // namespace stream_fake_test
