// Ping-pong example, callback flavour: the server. The same steps as the
// co_await flavour, as completion handlers that each start the next step: a
// receive is posted with a plain handler as soon as the connection exists,
// and again before each pong, so the client's next ping always finds one.
// Every wait is bounded by a deadline that cancels the operation.
//
// usage: ping_pong_callback_server <addr> <port>

#include "../../common.hpp"
#include "../protocol.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace asio = boost::asio;
namespace pp = ping_pong;
using example::quiet_limit;
constexpr const char* who = "server";

namespace {

class server {
 public:
  server(asio::io_context& io, arpma::endpoint& ep)
      : ep_(ep), dl_(io.get_executor()), send_dl_(io.get_executor()) {}
  [[nodiscard]] bool ok() const { return ok_; }

  void start(const arpma::peer& peer) {
    mr_ = example::reg(who, peer, memory_.data(), memory_.size(),
                       arpma::mr_usage::recv | arpma::mr_usage::send | arpma::mr_usage::write_dst);
    if (!mr_) return finish(false);
    ep_.async_next_conn_req(
        {}, dl_.arm(quiet_limit, [this](std::error_code ec, arpma::conn_req req) {
          dl_.disarm();
          if (ec) return fail("waiting for a connection request", ec);
          req.async_connect(mr_.descriptor(),
                            dl_.arm(quiet_limit, [this](std::error_code ec2, arpma::connection c) {
                              dl_.disarm();
                              if (ec2) return fail("accepting", ec2);
                              std::printf(
                                  "server: connection established, region descriptor sent in "
                                  "the private data\n");
                              conn_ = std::move(c);
                              post_recv();
                            }));
        }));
  }

 private:
  // The receive for the next ping: a plain handler, so it is posted now.
  // Only its wait is bounded (the deadline armed here).
  void post_recv() {
    conn_.async_recv(arpma::buffer(mr_, pp::recv_offset, pp::message_max).value(),
                     dl_.arm(quiet_limit, [this](std::error_code ec, arpma::completion c) {
                       dl_.disarm();
                       if (ec) return fail("waiting for a ping", ec);
                       got_ping(c);
                     }));
  }

  void got_ping(const arpma::completion& c) {
    ++round_;
    const bool by_write = c.opcode == arpma::wc_opcode::recv_rdma_with_imm;
    const std::string text =
        example::text_at(&memory_[by_write ? pp::write_offset : pp::recv_offset], pp::message_max);
    const bool imm_ok = c.imm && *c.imm == static_cast<std::uint32_t>(round_);
    const bool want_imm = round_ == pp::send_with_imm_round || round_ == pp::write_with_imm_round;
    if (text != "ping " + std::to_string(round_) ||
        by_write != (round_ == pp::write_with_imm_round) ||
        (want_imm ? !imm_ok : c.imm.has_value())) {
      std::printf("server: unexpected message in round %d: \"%s\"\n", round_, text.c_str());
      return finish(false);
    }
    if (want_imm)
      std::printf("server: got \"%s\" (%s with immediate data %u)\n", text.c_str(),
                  by_write ? "write" : "send", *c.imm);
    else
      std::printf("server: got \"%s\" (send)\n", text.c_str());
    send_pong();
  }

  void send_pong() {
    const int n = std::snprintf(&memory_[pp::pong_offset], pp::message_max, "pong %d", round_);
    // The next receive first: the client's next ping follows this pong. A
    // deadline bounds one operation at a time, so the send has its own.
    if (round_ < pp::rounds) post_recv();
    conn_.async_send(arpma::buffer(mr_, pp::pong_offset, static_cast<std::size_t>(n) + 1).value(),
                     send_dl_.arm(quiet_limit, [this](std::error_code ec, arpma::completion) {
                       send_dl_.disarm();
                       if (ec) return fail("sending the pong", ec, send_dl_);
                       std::printf("server: sent \"%s\"\n", &memory_[pp::pong_offset]);
                       if (round_ == pp::rounds) {
                         std::printf("server: %d round trips done\n", pp::rounds);
                         disconnect();
                       }
                     }));
  }

  // The server sends last, so it disconnects: were the client to disconnect
  // as soon as it has the last pong, the server's send could still be
  // waiting for its acknowledgement and be flushed.
  void disconnect() {
    conn_.async_disconnect(dl_.arm(quiet_limit, [this](std::error_code ec) {
      dl_.disarm();
      if (ec) return fail("disconnecting", ec);
      std::printf("server: disconnected, connection closed\n");
      finish(true);
    }));
  }

  void fail(const char* step, std::error_code ec) { fail(step, ec, dl_); }
  void fail(const char* step, std::error_code ec, const example::deadline& dl) {
    example::report(who, step, ec, dl);
    finish(false);
  }
  void finish(bool ok) {
    if (done_) return;
    done_ = true;
    ok_ = ok;
    dl_.disarm();
    send_dl_.disarm();
    (void)conn_.close();   // completes what is still in flight with operation_aborted
    (void)ep_.shutdown();  // a listening endpoint keeps the loop running
  }

  arpma::endpoint& ep_;
  example::deadline dl_;  // the receive, or the connection step under way
  example::deadline send_dl_;
  std::array<char, pp::server_size> memory_{};
  arpma::local_mr mr_;
  arpma::connection conn_;
  int round_ = 0;
  bool done_ = false;
  bool ok_ = false;
};

}  // namespace

int main(int argc, char* argv[]) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line visible at once, also in a pipe
  const example::args a = example::parse_args(argc, argv, false);
  auto peer = example::make_peer(who, a.addr, arpma::ibv_context_type::local);
  if (!peer) return EXIT_FAILURE;
  asio::io_context io;
  auto ep = example::listen(who, io, *peer, a);
  if (!ep) return EXIT_FAILURE;
  server s(io, *ep);
  s.start(*peer);
  io.run();
  std::printf("server: %s\n", s.ok() ? "done" : "FAILED");
  return s.ok() ? EXIT_SUCCESS : EXIT_FAILURE;
}
