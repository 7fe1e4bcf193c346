// Read example, callback flavour: the server. The same steps as the co_await
// flavour, written as completion handlers that each start the next step:
// take the request, accept it with the region's descriptor as private data,
// wait for the client to disconnect, close. Every wait is bounded by a
// deadline that cancels the operation.
//
// usage: read_callback_server <addr> <port>

#include "../../common.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

namespace asio = boost::asio;
using example::quiet_limit;
constexpr const char* who = "server";
constexpr std::string_view greeting = "hello from the server's memory";

namespace {

class server {
 public:
  server(asio::io_context& io, arpma::endpoint& ep) : ep_(ep), dl_(io.get_executor()) {
    greeting.copy(memory_.data(), memory_.size() - 1);
  }
  [[nodiscard]] bool ok() const { return ok_; }

  void start(const arpma::peer& peer) {
    mr_ = example::reg(who, peer, memory_.data(), memory_.size(), arpma::mr_usage::read_src);
    if (!mr_) return finish(false);
    std::printf("server: my memory holds \"%s\"\n", memory_.data());
    ep_.async_next_conn_req({},
                            dl_.arm(quiet_limit, [this](std::error_code ec, arpma::conn_req req) {
                              dl_.disarm();
                              if (ec) return fail("waiting for a connection request", ec);
                              accept(std::move(req));
                            }));
  }

 private:
  void accept(arpma::conn_req req) {
    desc_ = mr_.descriptor();  // lives until the accept completes
    req.async_connect(desc_, dl_.arm(quiet_limit, [this](std::error_code ec, arpma::connection c) {
      dl_.disarm();
      if (ec) return fail("accepting", ec);
      std::printf("server: connection established, region descriptor sent in the private data\n");
      conn_ = std::move(c);
      wait_closed();
    }));
  }

  void wait_closed() {
    conn_.async_next_event(dl_.arm(quiet_limit, [this](std::error_code ec, arpma::conn_event e) {
      dl_.disarm();
      if (ec) return fail("waiting for the client to disconnect", ec);
      if (e != arpma::conn_event::closed) {
        std::printf("server: unexpected connection event: %s\n", arpma::to_string(e));
        return finish(false);
      }
      conn_.async_disconnect(dl_.arm(quiet_limit, [this](std::error_code ec2) {
        dl_.disarm();
        if (ec2) return fail("disconnecting", ec2);
        std::printf("server: client disconnected, connection closed\n");
        finish(true);
      }));
    }));
  }

  void fail(const char* step, std::error_code ec) {
    example::report(who, step, ec, dl_);
    finish(false);
  }
  void finish(bool ok) {
    ok_ = ok;
    conn_ = arpma::connection{};
    (void)ep_.shutdown();  // a listening endpoint keeps the loop running
  }

  arpma::endpoint& ep_;
  example::deadline dl_;
  std::array<char, 4096> memory_{};
  arpma::local_mr mr_;
  arpma::mr_descriptor desc_{};
  arpma::connection conn_;
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
