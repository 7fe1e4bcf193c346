// Read example, callback flavour: the client. The same steps as the co_await
// flavour, written as completion handlers that each start the next step: a
// request to the server (retried for up to 5 s while it is not listening
// yet), connect, decode the region from the accept's private data, read the
// greeting, disconnect. Every wait is bounded by a deadline that cancels the
// operation.
//
// usage: read_callback_client <addr> <port>

#include "../../common.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace asio = boost::asio;
using example::quiet_limit;
constexpr const char* who = "client";

namespace {

class client {
 public:
  client(asio::io_context& io, const arpma::peer& peer, example::args a)
      : io_(io), peer_(peer), args_(std::move(a)), dl_(io.get_executor()), pause_(io) {}
  [[nodiscard]] bool ok() const { return ok_; }

  void start() {
    mr_ = example::reg(who, peer_, buf_.data(), buf_.size(), arpma::mr_usage::read_dst);
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
          if (ec) return fail("creating the connection request", ec);
          req.async_connect(
              {}, dl_.arm(quiet_limit, [this](std::error_code ec2, arpma::connection c) {
                dl_.disarm();
                if (!ec2) {
                  conn_ = std::move(c);
                  return read();
                }
                if (!example::not_listening_yet(ec2) || std::chrono::steady_clock::now() > give_up_)
                  return fail("connecting", ec2);
                pause_.expires_after(example::retry_pause);
                pause_.async_wait([this](std::error_code) { attempt(); });
              }));
        }));
  }

  void read() {
    const auto remote = example::server_region(who, conn_);
    if (!remote) return fail("decoding the region", {});
    const std::size_t len = std::min<std::size_t>(buf_.size(), remote->size());
    std::printf("client: reading %zu bytes from offset 0 of the server's region\n", len);
    conn_.async_read(arpma::buffer(mr_, 0, len).value(), arpma::buffer(*remote, 0, len).value(),
                     dl_.arm(quiet_limit, [this](std::error_code ec, arpma::completion) {
                       dl_.disarm();
                       if (ec) return fail("reading", ec);
                       std::printf("client: read the server's greeting: \"%s\"\n",
                                   example::text_at(buf_.data(), buf_.size()).c_str());
                       disconnect();
                     }));
  }

  void disconnect() {
    conn_.async_disconnect(dl_.arm(quiet_limit, [this](std::error_code ec) {
      dl_.disarm();
      conn_ = arpma::connection{};
      if (ec) return fail("disconnecting", ec);
      std::printf("client: disconnected, connection closed\n");
      ok_ = true;
    }));
  }

  void fail(const char* step, std::error_code ec) {
    conn_ = arpma::connection{};
    if (ec || dl_.expired()) example::report(who, step, ec, dl_);
  }

  asio::io_context& io_;
  const arpma::peer& peer_;
  example::args args_;
  example::deadline dl_;
  asio::steady_timer pause_;
  std::chrono::steady_clock::time_point give_up_;
  std::array<char, 64> buf_{};
  arpma::local_mr mr_;
  arpma::connection conn_;
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
