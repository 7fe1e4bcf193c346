// Ping-pong example, callback flavour: the client. The same rounds as the
// co_await flavour, as completion handlers: each round posts the receive for
// the pong first (a plain handler starts it at once), then sends "ping i"
// (send, send_with_imm or write_with_imm, per ../protocol.hpp); the round is
// over when both have completed. Each operation has its own deadline.
//
// usage: ping_pong_callback_client <addr> <port>

#include "../../common.hpp"
#include "../protocol.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace asio = boost::asio;
namespace pp = ping_pong;
using example::quiet_limit;
constexpr const char* who = "client";

namespace {

class client {
 public:
  client(asio::io_context& io, const arpma::peer& peer, example::args a)
      : io_(io),
        peer_(peer),
        args_(std::move(a)),
        dl_(io.get_executor()),
        send_dl_(io.get_executor()),
        pause_(io) {}
  [[nodiscard]] bool ok() const { return ok_; }

  void start() {
    mr_ = example::reg(who, peer_, buf_.data(), buf_.size(),
                       arpma::mr_usage::send | arpma::mr_usage::recv | arpma::mr_usage::write_src);
    if (!mr_) return;
    std::printf("client: connecting to %s:%s\n", args_.addr.c_str(), args_.port.c_str());
    give_up_ = std::chrono::steady_clock::now() + example::retry_limit;
    attempt();
  }

 private:
  void attempt() {
    arpma::async_conn_req_new(
        io_.get_executor(), peer_, args_.addr, args_.port, {},
        dl_.arm(quiet_limit, [this](std::error_code ec, arpma::conn_req req) {
          dl_.disarm();
          if (ec) return fail("creating the connection request", ec, dl_);
          req.async_connect(
              {}, dl_.arm(quiet_limit, [this](std::error_code ec2, arpma::connection c) {
                dl_.disarm();
                if (!ec2) {
                  conn_ = std::move(c);
                  remote_ = example::server_region(who, conn_);
                  if (!remote_) return fail("decoding the region", {}, dl_);
                  return round();
                }
                if (!example::not_listening_yet(ec2) || std::chrono::steady_clock::now() > give_up_)
                  return fail("connecting", ec2, dl_);
                pause_.expires_after(example::retry_pause);
                pause_.async_wait([this](std::error_code) { attempt(); });
              }));
        }));
  }

  // One round: the receive for the pong, then the ping.
  void round() {
    ++round_;
    sent_ = got_ = false;
    conn_.async_recv(arpma::buffer(mr_, pp::client_recv_offset, pp::message_max).value(),
                     dl_.arm(quiet_limit, [this](std::error_code ec, arpma::completion) {
                       dl_.disarm();
                       if (ec) return fail("waiting for the pong", ec, dl_);
                       const std::string text =
                           example::text_at(&buf_[pp::client_recv_offset], pp::message_max);
                       std::printf("client: got \"%s\"\n", text.c_str());
                       if (text != "pong " + std::to_string(round_))
                         return fail("checking the pong", {}, dl_);
                       got_ = true;
                       next();
                     }));

    const int n = std::snprintf(&buf_[pp::ping_offset], pp::message_max, "ping %d", round_);
    const std::size_t len = static_cast<std::size_t>(n) + 1;
    const auto imm = static_cast<std::uint32_t>(round_);
    auto on_sent = send_dl_.arm(quiet_limit, [this](std::error_code ec, arpma::completion) {
      send_dl_.disarm();
      if (ec) return fail("sending the ping", ec, send_dl_);
      if (round_ == pp::send_with_imm_round)
        std::printf("client: sent \"%s\" by send_with_imm, immediate data %d\n",
                    &buf_[pp::ping_offset], round_);
      else if (round_ == pp::write_with_imm_round)
        std::printf(
            "client: sent \"%s\" by write_with_imm into the server's region, immediate data %d\n",
            &buf_[pp::ping_offset], round_);
      else
        std::printf("client: sent \"%s\" by send\n", &buf_[pp::ping_offset]);
      sent_ = true;
      next();
    });
    if (round_ == pp::send_with_imm_round)
      conn_.async_send_with_imm(arpma::buffer(mr_, pp::ping_offset, len).value(), imm,
                                std::move(on_sent));
    else if (round_ == pp::write_with_imm_round)
      conn_.async_write_with_imm(arpma::buffer(*remote_, pp::write_offset, len).value(),
                                 arpma::buffer(mr_, pp::ping_offset, len).value(), imm,
                                 std::move(on_sent));
    else
      conn_.async_send(arpma::buffer(mr_, pp::ping_offset, len).value(), std::move(on_sent));
  }

  // After each completion of a round: the next round once both are in.
  void next() {
    if (!sent_ || !got_ || failed_) return;
    if (round_ < pp::rounds) return round();
    std::printf("client: %d round trips done\n", pp::rounds);
    // The server disconnects once its last pong has completed.
    conn_.async_next_event(dl_.arm(quiet_limit, [this](std::error_code ec, arpma::conn_event e) {
      dl_.disarm();
      if (ec) return fail("waiting for the server to disconnect", ec, dl_);
      if (e != arpma::conn_event::closed) {
        std::printf("client: unexpected connection event: %s\n", arpma::to_string(e));
        return fail("waiting for the server to disconnect", {}, dl_);
      }
      conn_.async_disconnect(dl_.arm(quiet_limit, [this](std::error_code ec2) {
        dl_.disarm();
        if (ec2) return fail("disconnecting", ec2, dl_);
        conn_ = arpma::connection{};
        std::printf("client: server disconnected, connection closed\n");
        ok_ = true;
      }));
    }));
  }

  void fail(const char* step, std::error_code ec, const example::deadline& dl) {
    if (failed_) return;
    failed_ = true;
    if (ec || dl.expired()) example::report(who, step, ec, dl);
    dl_.disarm();
    send_dl_.disarm();
    (void)conn_.close();  // completes what is still in flight with operation_aborted
  }

  asio::io_context& io_;
  const arpma::peer& peer_;
  example::args args_;
  example::deadline dl_;  // the receive, or the connection step under way
  example::deadline send_dl_;
  asio::steady_timer pause_;
  std::chrono::steady_clock::time_point give_up_;
  std::array<char, pp::client_size> buf_{};
  arpma::local_mr mr_;
  arpma::connection conn_;
  std::optional<arpma::remote_mr> remote_;
  int round_ = 0;
  bool sent_ = false;
  bool got_ = false;
  bool failed_ = false;
  bool ok_ = false;
};

}  // namespace

int main(int argc, char* argv[]) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line visible at once, also in a pipe
  example::args a = example::parse_args(argc, argv, false);
  auto peer = example::make_peer(who, a.addr, arpma::ibv_context_type::remote);
  if (!peer) return EXIT_FAILURE;
  asio::io_context io;
  client c(io, *peer, std::move(a));
  c.start();
  io.run();
  std::printf("client: %s\n", c.ok() ? "done" : "FAILED");
  return c.ok() ? EXIT_SUCCESS : EXIT_FAILURE;
}
