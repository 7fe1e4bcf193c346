// arpma::stream's members, its configuration and greeting, and the two ways
// to make one (connect, accept).
#include "arpma/stream.hpp"

#include "core/parked_op.hpp"
#include "core/stream_state.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/error.hpp>

#include <boost/asio/strand.hpp>

#include <optional>
#include <system_error>
#include <utility>

namespace arpma {

namespace {

constexpr std::uint32_t hello_magic = 0x61725354;  // "arST"
constexpr std::uint16_t hello_version = 1;
constexpr std::uint32_t max_slots = 4095;  // the immediate's credit field
constexpr std::uint32_t max_control_slots = 255;
constexpr std::uint32_t max_slot_size = 1U << 20;

void put32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 3; i >= 0; --i, v >>= 8) p[i] = static_cast<std::uint8_t>(v);
}
std::uint32_t get32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         p[3];
}

}  // namespace

conn_cfg stream_cfg::connection_cfg() const noexcept {
  conn_cfg c;
  c.timeout = timeout;
  c.sq_size = slots + control_slots;
  c.rq_size = slots + control_slots;
  c.cq_size = 2 * (slots + control_slots);
  c.rcq_size = 0;
  return c;
}

std::size_t stream_cfg::memory() const noexcept {
  return (2 * std::size_t{slots} + control_slots) * slot_size;
}

std::error_code stream_cfg::check() const noexcept {
  if (slots < 1 || slots > max_slots || control_slots < 1 || control_slots > max_control_slots ||
      slot_size < 1 || slot_size > max_slot_size || timeout.count() < 0 || busy_poll.count() < 0)
    return make_error_code(errc::invalid_argument);
  return {};
}

namespace detail {

std::array<std::uint8_t, stream_hello_size> encode_hello(const stream_cfg& cfg) {
  std::array<std::uint8_t, stream_hello_size> out{};
  put32(out.data(), hello_magic);
  put32(out.data() + 4, (std::uint32_t{hello_version} << 16) | cfg.control_slots);
  put32(out.data() + 8, cfg.slots);
  put32(out.data() + 12, cfg.slot_size);
  return out;
}

std::optional<stream_cfg> decode_hello(std::span<const std::uint8_t> data) {
  if (data.size() < stream_hello_size || get32(data.data()) != hello_magic) return std::nullopt;
  const std::uint32_t word = get32(data.data() + 4);
  stream_cfg cfg;
  cfg.control_slots = word & 0xffffU;
  cfg.slots = get32(data.data() + 8);
  cfg.slot_size = get32(data.data() + 12);
  if ((word >> 16) != hello_version || cfg.check()) return std::nullopt;
  return cfg;
}

namespace {

const boost::asio::any_io_executor no_executor;

void complete(const boost::asio::any_io_executor& ex, stream_handler handler, error_code ec,
              stream s) {
  post_completion(ex, std::move(handler), ec, std::move(s));
}

error_code protocol_error() { return std::make_error_code(std::errc::protocol_error); }

// Posts the receives, connects (or accepts) sending our hello, and hands the
// connection to the stream when it is established.
// `ex` is the loop's: an incoming request has none of its own before it
// connects.
void connect_request(const boost::asio::any_io_executor& ex, std::shared_ptr<stream_state> st,
                     conn_req req, std::optional<stream_cfg> peer_of_request,
                     stream_handler handler) {
  if (auto ec = st->post_receives(req)) return complete(ex, std::move(handler), ec, stream());
  const auto hello = encode_hello(st->cfg());
  auto slot = handler.get_cancellation_slot();
  req.async_connect(
      hello,
      boost::asio::bind_cancellation_slot(slot, [ex, st, peer_of_request, h = std::move(handler)](
                                                    const error_code& ec, connection conn) mutable {
        if (ec) return complete(ex, std::move(h), ec, stream());
        auto peer = peer_of_request ? peer_of_request : decode_hello(conn.private_data());
        if (!peer) return complete(ex, std::move(h), protocol_error(), stream());
        st->attach(std::move(conn), *peer);
        complete(ex, std::move(h), {}, access::make<stream>(std::move(st)));
      }));
}

void accept_next(endpoint* ep, std::shared_ptr<stream_state> st, stream_handler handler) {
  auto slot = handler.get_cancellation_slot();
  const auto cfg = st->cfg().connection_cfg();
  ep->async_next_conn_req(
      cfg, boost::asio::bind_cancellation_slot(
               slot, [ep, st, h = std::move(handler)](const error_code& ec, conn_req req) mutable {
                 if (ec) return complete(ep->get_executor(), std::move(h), ec, stream());
                 auto peer = decode_hello(req.private_data());
                 if (!peer) {
                   (void)req.reject();  // not a stream: the next one
                   return accept_next(ep, std::move(st), std::move(h));
                 }
                 connect_request(ep->get_executor(), std::move(st), std::move(req), peer,
                                 std::move(h));
               }));
}

// The stream's memory, registered before anything goes on the wire.
std::shared_ptr<stream_state> prepared(const peer& p, const stream_cfg& cfg, error_code& ec) {
  if (auto e = cfg.check()) {
    ec = e;
    return nullptr;
  }
  auto st = std::make_shared<stream_state>(cfg);
  if (auto e = st->prepare(p)) {
    ec = e;
    return nullptr;
  }
  return st;
}

void fail_now(const boost::asio::any_io_executor& ex, stream_handler handler, error_code ec) {
  fail_on_loop(ex, std::move(handler), ec, stream());
}

}  // namespace

const boost::asio::any_io_executor& executor_of(const stream_state* state) noexcept {
  return state != nullptr ? state->executor() : no_executor;
}

void start_stream_read(stream_state* state, const stream_buffers<boost::asio::mutable_buffer>& bufs,
                       stream_io_handler handler, bool local) {
  if (state == nullptr)
    return fail_at_once(std::move(handler), error_code(boost::asio::error::bad_descriptor),
                        std::size_t{0});
  state->start_read(bufs, std::move(handler), local);
}

void start_stream_write(stream_state* state, const stream_buffers<boost::asio::const_buffer>& bufs,
                        stream_io_handler handler, bool local) {
  if (state == nullptr)
    return fail_at_once(std::move(handler), error_code(boost::asio::error::bad_descriptor),
                        std::size_t{0});
  state->start_write(bufs, std::move(handler), local);
}

namespace {

// Runs `start(handler)` and the stream's io_context until the handler ran.
template <class Start>
std::size_t run_to_completion(stream_state* state, error_code& ec, Start start) {
  if (state == nullptr) {
    ec = boost::asio::error::bad_descriptor;
    return 0;
  }
  const auto& ex = state->executor();
  boost::asio::io_context* io = nullptr;
  using loop_executor = boost::asio::io_context::executor_type;
  if (const auto* plain = ex.target<loop_executor>())
    io = &plain->context();
  else if (const auto* strand = ex.target<boost::asio::strand<loop_executor>>())
    io = &strand->get_inner_executor().context();
  if (io == nullptr || state->busy()) {
    ec = boost::asio::error::would_block;  // no loop to run, or ours is on the stack
    return 0;
  }
  std::optional<std::pair<error_code, std::size_t>> out;
  start(stream_io_handler([&out](error_code e, std::size_t n) { out.emplace(e, n); }));
  while (!out) {
    if (io->stopped()) io->restart();
    io->run_one();
  }
  ec = out->first;
  return out->second;
}

}  // namespace

std::size_t sync_read(stream_state* state, const stream_buffers<boost::asio::mutable_buffer>& bufs,
                      error_code& ec) {
  return run_to_completion(
      state, ec, [&](stream_io_handler h) { state->start_read(bufs, std::move(h), true); });
}

std::size_t sync_write(stream_state* state, const stream_buffers<boost::asio::const_buffer>& bufs,
                       error_code& ec) {
  return run_to_completion(
      state, ec, [&](stream_io_handler h) { state->start_write(bufs, std::move(h), true); });
}

void start_connect_stream(const boost::asio::any_io_executor& ex, const peer& p,
                          const std::string& addr, const std::string& port, const stream_cfg& cfg,
                          stream_handler handler) {
  error_code ec;
  auto st = prepared(p, cfg, ec);
  if (!st) return fail_now(ex, std::move(handler), ec);
  auto slot = handler.get_cancellation_slot();
  async_conn_req_new(
      ex, p, addr, port, cfg.connection_cfg(),
      boost::asio::bind_cancellation_slot(
          slot, [ex, st, h = std::move(handler)](const error_code& e, conn_req req) mutable {
            if (e) return complete(ex, std::move(h), e, stream());
            connect_request(ex, std::move(st), std::move(req), std::nullopt, std::move(h));
          }));
}

void start_accept_stream(endpoint& ep, const peer& p, const stream_cfg& cfg,
                         stream_handler handler) {
  error_code ec;
  auto st = prepared(p, cfg, ec);
  if (!st) return fail_now(ep.get_executor(), std::move(handler), ec);
  accept_next(&ep, std::move(st), std::move(handler));
}

}  // namespace detail

// ---- arpma::stream ---------------------------------------------------------

stream::stream() noexcept = default;
stream::stream(std::shared_ptr<detail::stream_state> state) noexcept : state_(std::move(state)) {}
stream::stream(stream&&) noexcept = default;
stream& stream::operator=(stream&& other) noexcept {
  if (this != &other) {
    close();
    state_ = std::move(other.state_);
  }
  return *this;
}
stream::~stream() { close(); }

connection& stream::lowest_layer() noexcept {
  static connection none;
  return state_ ? state_->conn() : none;
}
const connection& stream::lowest_layer() const noexcept {
  static const connection none;
  return state_ ? state_->conn() : none;
}

const stream_cfg& stream::config() const noexcept {
  static const stream_cfg defaults;
  return state_ ? state_->cfg() : defaults;
}

error_code stream::shutdown(boost::asio::socket_base::shutdown_type what) noexcept {
  if (!state_) return boost::asio::error::bad_descriptor;
  if (what != boost::asio::socket_base::shutdown_receive) state_->shutdown();
  return {};
}

void stream::close() noexcept {
  if (!state_) return;
  state_->close();
  state_.reset();
}

}  // namespace arpma
