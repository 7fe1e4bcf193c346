#include "ops.hpp"

#include "setup.hpp"

#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <chrono>

namespace arpma_perf {
namespace {

namespace ex = boost::asio::experimental;

std::size_t remote_offset(const link& l, std::size_t size, std::uint32_t slot) {
  const std::size_t places = static_cast<std::size_t>(l.remote.size()) / size;
  return (slot % places) * size;
}

// Two operations posted back to back, done when both are: RC completes them in order, so
// this is the time to the second one's completion.
template <class First, class Second>
asio::awaitable<std::error_code> both(First first, Second second) {
  auto [order, ec1, c1, ec2, c2] =
      co_await ex::make_parallel_group(std::move(first), std::move(second))
          .async_wait(ex::wait_for_all(), asio::use_awaitable);
  co_return ec1 ? ec1 : ec2;
}

// One initiation: the receive for the echo is posted before the send leaves, and only the
// receive completes the caller's operation.
struct echo_then_send {
  link& l;
  std::size_t size;
  template <class Handler>
  void operator()(Handler&& echo) const {
    l.conn.async_recv(arpma::buffer(l.mr, l.max_size, size).value(), std::forward<Handler>(echo));
    ++l.sends_out;
    l.conn.async_send(arpma::buffer(l.mr, 0, size).value(),
                      [&sender = l](const std::error_code& ec, const arpma::completion&) {
                        --sender.sends_out;
                        if (ec && !sender.send_error) sender.send_error = ec;
                      });
  }
};

// Send lat: a receive for the echo, then the send; the server sends the message back. The
// round trip ends with the echo, as perftest's ib_send_lat counts it: the send's own
// completion (the peer's ACK, which may come after the echo) is taken off the critical path,
// counted in `sends_out` and bounded by the send queue (sq_size is 2 qd).
asio::awaitable<std::error_code> ping(link& l, const options& o, std::size_t size) {
  if (l.sends_out >= 2 * o.qd) {
    asio::steady_timer later(l.conn.get_executor());
    while (l.sends_out >= 2 * o.qd && !l.send_error) {
      later.expires_after(std::chrono::microseconds(10));
      co_await later.async_wait(awaitable_tuple);
    }
  }
  if (l.send_error) co_return l.send_error;
  auto [rec, got] = co_await asio::async_initiate<decltype(awaitable_tuple),
                                                  void(std::error_code, arpma::completion)>(
      echo_then_send{l, size}, awaitable_tuple);
  if (rec) co_return l.send_error ? l.send_error : rec;
  if (got.byte_len != size) co_return std::make_error_code(std::errc::protocol_error);
  co_return std::error_code{};
}

// One coroutine per kind, each with a small frame: Asio recycles a coroutine frame only up to
// 1,020 bytes (thread_info_base: 255 chunks of 4), and one coroutine holding every kind's
// temporaries took 1,312, so each operation paid a malloc and a free for it and, by evicting
// Asio's cached blocks, a second pair for its initiation's frame (gdb on malloc).
asio::awaitable<std::error_code> write_op(link& l, std::size_t at, std::size_t size) {
  auto [ec, c] = co_await l.conn.async_write(arpma::buffer(l.remote, at, size).value(),
                                             arpma::buffer(l.mr, 0, size).value(), awaitable_tuple);
  co_return ec;
}

asio::awaitable<std::error_code> read_op(link& l, std::size_t at, std::size_t size) {
  auto [ec, c] =
      co_await l.conn.async_read(arpma::buffer(l.mr, 0, size).value(),
                                 arpma::buffer(l.remote, at, size).value(), awaitable_tuple);
  co_return ec;
}

asio::awaitable<std::error_code> atomic_write_op(link& l, std::size_t at) {
  const std::array<char, 8> value{'a', 'r', 'p', 'm', 'a', 'p', 'r', 'f'};
  auto [ec, c] = co_await l.conn.async_atomic_write(arpma::buffer(l.remote, at, 8).value(), value,
                                                    awaitable_tuple);
  co_return ec;
}

asio::awaitable<std::error_code> send_op(link& l, std::size_t size) {
  auto [ec, c] = co_await l.conn.async_send(arpma::buffer(l.mr, 0, size).value(), awaitable_tuple);
  co_return ec;
}

asio::awaitable<std::error_code> invalid_op() {
  co_return std::make_error_code(std::errc::invalid_argument);
}

}  // namespace

arpma::conn_cfg client_cfg(const options& o) {
  arpma::conn_cfg cfg;
  cfg.sq_size = std::max(cfg.sq_size, 2 * o.qd);
  cfg.rq_size = std::max(cfg.rq_size, o.qd);
  cfg.cq_size = cfg.sq_size + cfg.rq_size;
  return cfg;
}

std::string prepare_link(link& l, const arpma::peer& peer, const options& o, std::size_t max_size) {
  auto remote = arpma::remote_mr::from_descriptor(l.conn.private_data());
  if (!remote) return "the server's private data is no region descriptor (not arpma-perf?)";
  if (remote.value().size() < max_size)
    return "the server's region (" + std::to_string(remote.value().size()) +
           " bytes) is smaller than the largest --size";
  l.remote = remote.value();
  l.max_size = max_size;
  l.memory.assign(2 * max_size, 'a');
  auto mr = arpma::local_mr::reg(peer, l.memory.data(), l.memory.size(), arpma::mr_usage::all);
  if (!mr)
    return "registering " + std::to_string(l.memory.size()) + " bytes: " + mr.error().message();
  l.mr = std::move(mr.value());
  if (o.mode == poll_mode::busy_poll) l.conn.set_busy_poll(busy_poll_budget);
  return {};
}

// Not a coroutine itself: it hands back the kind's own, so that no frame sits between the lane
// and the operation.
asio::awaitable<std::error_code> one_op(link& l, const options& o, std::size_t size,
                                        std::uint32_t slot) {
  const std::size_t at = remote_offset(l, size, slot);
  switch (o.op) {
    case op_kind::write: return write_op(l, at, size);
    case op_kind::read: return read_op(l, at, size);
    case op_kind::atomic_write: return atomic_write_op(l, at);
    case op_kind::flush:
      return both(l.conn.async_write(arpma::buffer(l.remote, at, size).value(),
                                     arpma::buffer(l.mr, 0, size).value(), asio::deferred),
                  l.conn.async_flush(arpma::buffer(l.remote, at, size).value(),
                                     arpma::flush_type::visibility, asio::deferred));
    case op_kind::send: return o.test == test_kind::lat ? ping(l, o, size) : send_op(l, size);
  }
  return invalid_op();
}

}  // namespace arpma_perf
