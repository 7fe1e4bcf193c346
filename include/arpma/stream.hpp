// arpma::stream: a reliable byte stream over one RDMA connection, modelling
// Asio's AsyncReadStream and AsyncWriteStream, so that asio::async_read,
// asio::async_write, asio::async_read_until and Beast run on it as on a TCP
// socket. Wire protocol, flow control and memory: docs/stream.md.
#pragma once

#include "arpma/conn_cfg.hpp"
#include "arpma/connection.hpp"
#include "arpma/detail/wc_op.hpp"
#include "arpma/endpoint.hpp"
#include "arpma/error.hpp"
#include "arpma/peer.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/system/system_error.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace arpma {

/// The shape of a stream; every byte of it is allocated and registered when
/// the stream is made, and nothing grows after (docs/stream.md).
struct stream_cfg {
  /// Data messages in flight each way (receive credits); 1..4095.
  std::uint32_t slots = 8;
  /// Credit-only messages in flight each way; 1..255.
  std::uint32_t control_slots = 4;
  /// Bytes per message (and per slot); 1 byte .. 1 MiB. Per-message costs
  /// dominate small slots: on the soft provider 64 KiB writes ran at 0.28x
  /// TCP with 8 KiB slots, 0.62-0.75x with 16 of 32 KiB and 0.77-0.89x with
  /// 8 of 64 KiB (bench/stream_bench, docs/stream.md).
  std::uint32_t slot_size = 65536;
  /// Address and route resolution deadline, each phase (conn_cfg::timeout).
  std::chrono::milliseconds timeout = conn_cfg::default_timeout;
  /// Busy polling: while an operation waits, poll the CQ from the loop
  /// (between other handlers) for up to this long since the last
  /// completion before sleeping on the completion channel. 0: sleep at once.
  /// This side's choice; not sent to the peer.
  std::chrono::microseconds busy_poll{0};

  /// The connection shape the stream needs: send and receive queues of
  /// slots + control_slots, a CQ for both, no receive CQ.
  [[nodiscard]] conn_cfg connection_cfg() const noexcept;
  /// Registered memory per stream: (2 × slots + control_slots) × slot_size.
  [[nodiscard]] std::size_t memory() const noexcept;
  /// errc::invalid_argument for a field out of its range.
  [[nodiscard]] std::error_code check() const noexcept;
};

class stream;

namespace detail {
class stream_state;
using stream_io_signature = void(error_code, std::size_t);
using stream_io_handler = boost::asio::any_completion_handler<stream_io_signature>;
using stream_signature = void(error_code, stream);
using stream_handler = boost::asio::any_completion_handler<stream_signature>;

/// How many buffers of a sequence one operation takes (the rest wait for the
/// next), as Asio's buffer_sequence_adapter.
inline constexpr std::size_t max_stream_buffers = 16;
template <class Buffer>
struct stream_buffers {
  std::array<Buffer, max_stream_buffers> items{};
  std::size_t count = 0;
  template <class Sequence>
  explicit stream_buffers(const Sequence& seq) {
    auto end = boost::asio::buffer_sequence_end(seq);
    for (auto it = boost::asio::buffer_sequence_begin(seq); it != end && count < items.size(); ++it)
      items[count++] = Buffer(*it);
  }
};

/// `local`: the handler runs on the stream's own executor (found while its
/// type is known: erased, asking would cost a heap block per completion).
void start_stream_read(stream_state* state, const stream_buffers<boost::asio::mutable_buffer>& bufs,
                       stream_io_handler handler, bool local);
void start_stream_write(stream_state* state, const stream_buffers<boost::asio::const_buffer>& bufs,
                        stream_io_handler handler, bool local);
[[nodiscard]] const boost::asio::any_io_executor& executor_of(const stream_state* state) noexcept;
/// The blocking forms: start the operation, then run the stream's
/// io_context one handler at a time until it completes.
std::size_t sync_read(stream_state* state, const stream_buffers<boost::asio::mutable_buffer>& bufs,
                      error_code& ec);
std::size_t sync_write(stream_state* state, const stream_buffers<boost::asio::const_buffer>& bufs,
                       error_code& ec);
void start_connect_stream(const boost::asio::any_io_executor& ex, const peer& p,
                          const std::string& addr, const std::string& port, const stream_cfg& cfg,
                          stream_handler handler);
void start_accept_stream(endpoint& ep, const peer& p, const stream_cfg& cfg,
                         stream_handler handler);

struct initiate_stream_read {
  stream_state* state;
  using executor_type = boost::asio::any_io_executor;
  [[nodiscard]] executor_type get_executor() const noexcept { return executor_of(state); }
  template <class Handler, class Sequence>
  void operator()(Handler&& handler, const Sequence& seq) const {
    const bool local = runs_on(handler, executor_of(state));
    start_stream_read(state, stream_buffers<boost::asio::mutable_buffer>(seq),
                      stream_io_handler(std::forward<Handler>(handler)), local);
  }
};
struct initiate_stream_write {
  stream_state* state;
  using executor_type = boost::asio::any_io_executor;
  [[nodiscard]] executor_type get_executor() const noexcept { return executor_of(state); }
  template <class Handler, class Sequence>
  void operator()(Handler&& handler, const Sequence& seq) const {
    const bool local = runs_on(handler, executor_of(state));
    start_stream_write(state, stream_buffers<boost::asio::const_buffer>(seq),
                       stream_io_handler(std::forward<Handler>(handler)), local);
  }
};
}  // namespace detail

/// A connected byte stream. Made by async_connect_stream or
/// async_accept_stream; move-only. Not thread-safe: use it on its executor
/// (the loop or strand it was made on), as an Asio socket.
///
/// Reads and writes copy between the caller's buffers and the stream's
/// registered slots: a write completes once its bytes are in slots and
/// posted (at least one byte, as much as the peer's credits allow), a read
/// once at least one byte is copied out. A writer the peer gives no credit
/// waits: a slow reader stops it, memory stays fixed. At most one read and
/// one write may be pending at a time (a second one completes with
/// asio::error::in_progress).
///
/// Errors of reads and writes: asio::error::eof (the peer shut its sending
/// side down and every byte before it was read), asio::error::shut_down (a
/// write after this side's shutdown), asio::error::connection_reset (the
/// peer died, disconnected without a shutdown, or broke the protocol; bytes
/// received before are read first), asio::error::operation_aborted
/// (cancelled, or the stream closed), asio::error::bad_descriptor (an empty
/// stream).
class stream {
 public:
  using executor_type = boost::asio::any_io_executor;
  using default_token = boost::asio::default_completion_token_t<executor_type>;
  using lowest_layer_type = connection;

  stream() noexcept;
  stream(stream&&) noexcept;
  stream& operator=(stream&&) noexcept;
  /// close(): an orderly end when every byte received was read, else a reset.
  ~stream();

  explicit operator bool() const noexcept { return state_ != nullptr; }
  [[nodiscard]] executor_type get_executor() const noexcept {
    return detail::executor_of(state_.get());
  }
  /// The connection underneath. Its data operations and completion queue are
  /// the stream's: use it for its events and queries only.
  [[nodiscard]] connection& lowest_layer() noexcept;
  [[nodiscard]] const connection& lowest_layer() const noexcept;
  /// Its shape (with the peer's slot count and size as agreed).
  [[nodiscard]] const stream_cfg& config() const noexcept;

  /// Reads at least one byte into `buffers` (the first 16 of the sequence).
  /// Completion signature: `void(arpma::error_code, std::size_t)`.
  /// Cancellation: terminal, partial and total; nothing is consumed.
  template <class MutableBufferSequence,
            boost::asio::completion_token_for<detail::stream_io_signature> CompletionToken =
                default_token>
  auto async_read_some(const MutableBufferSequence& buffers,
                       CompletionToken&& token = default_token()) {
    return boost::asio::async_initiate<CompletionToken, detail::stream_io_signature>(
        detail::initiate_stream_read{state_.get()}, token, buffers);
  }
  /// Writes at least one byte of `buffers` (the first 16 of the sequence).
  /// Completion signature: `void(arpma::error_code, std::size_t)`.
  /// Cancellation: terminal, partial and total, while it waits for credit:
  /// nothing was sent.
  template <class ConstBufferSequence,
            boost::asio::completion_token_for<detail::stream_io_signature> CompletionToken =
                default_token>
  auto async_write_some(const ConstBufferSequence& buffers,
                        CompletionToken&& token = default_token()) {
    return boost::asio::async_initiate<CompletionToken, detail::stream_io_signature>(
        detail::initiate_stream_write{state_.get()}, token, buffers);
  }

  /// The blocking forms (SyncReadStream, SyncWriteStream): the same
  /// operations, completed by running the stream's io_context from the
  /// calling thread (other handlers of that loop run meanwhile, as in
  /// run_one). Not from inside one of the stream's own handlers:
  /// asio::error::would_block there. Errors as the async forms; the
  /// overloads without `ec` throw boost::system::system_error.
  template <class MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers, error_code& ec) {
    return detail::sync_read(state_.get(),
                             detail::stream_buffers<boost::asio::mutable_buffer>(buffers), ec);
  }
  template <class MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers) {
    error_code ec;
    const auto n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec, "arpma::stream::read_some");
    return n;
  }
  template <class ConstBufferSequence>
  std::size_t write_some(const ConstBufferSequence& buffers, error_code& ec) {
    return detail::sync_write(state_.get(),
                              detail::stream_buffers<boost::asio::const_buffer>(buffers), ec);
  }
  template <class ConstBufferSequence>
  std::size_t write_some(const ConstBufferSequence& buffers) {
    error_code ec;
    const auto n = write_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec, "arpma::stream::write_some");
    return n;
  }

  /// Ends this side's sending (shutdown_send or shutdown_both; receiving
  /// goes on either way): the peer reads eof after every byte written
  /// before. Errors: asio::error::bad_descriptor (an empty stream).
  error_code shutdown(boost::asio::socket_base::shutdown_type what =
                          boost::asio::socket_base::shutdown_send) noexcept;
  /// Ends the stream: pending operations complete with operation_aborted.
  /// With every byte received read, this side shuts down and, once its last
  /// messages are delivered, disconnects (in the background, while the loop
  /// runs); with bytes unread, or a broken link, it disconnects at once and
  /// the peer's operations end with connection_reset.
  void close() noexcept;

 private:
  friend struct detail::access;
  explicit stream(std::shared_ptr<detail::stream_state> state) noexcept;
  std::shared_ptr<detail::stream_state> state_;
};

/// Connects to a stream at `addr`:`port` (as async_conn_req_new, then
/// conn_req::async_connect), with the stream's receives posted before the
/// connection is established.
///
/// Completion signature: `void(arpma::error_code, arpma::stream)`. Errors:
/// those of async_conn_req_new and async_connect; errc::invalid_argument for
/// a cfg out of range; errc::not_supported on a device without immediate data
/// (iWARP); errc::provider with std::errc::protocol_error when the
/// server is no stream.
template <boost::asio::completion_token_for<detail::stream_signature> CompletionToken =
              boost::asio::default_completion_token_t<boost::asio::any_io_executor>>
auto async_connect_stream(const boost::asio::any_io_executor& ex, const peer& p,
                          std::string_view addr, std::string_view port, const stream_cfg& cfg,
                          CompletionToken&& token = CompletionToken()) {
  return boost::asio::async_initiate<CompletionToken, detail::stream_signature>(
      [pp = &p](auto handler, const boost::asio::any_io_executor& io, const std::string& a,
                const std::string& s, const stream_cfg& c) {
        detail::start_connect_stream(io, *pp, a, s, c, detail::stream_handler(std::move(handler)));
      },
      token, ex, std::string(addr), std::string(port), cfg);
}

/// Accepts the endpoint's next incoming request as a stream (a request that
/// is no stream is rejected, and the next one awaited).
///
/// Completion signature: `void(arpma::error_code, arpma::stream)`. Errors:
/// those of endpoint::async_next_conn_req and conn_req::async_connect;
/// errc::invalid_argument for a cfg out of range; errc::not_supported on a
/// device without immediate data (iWARP).
template <boost::asio::completion_token_for<detail::stream_signature> CompletionToken =
              boost::asio::default_completion_token_t<boost::asio::any_io_executor>>
auto async_accept_stream(endpoint& ep, const peer& p, const stream_cfg& cfg,
                         CompletionToken&& token = CompletionToken()) {
  return boost::asio::async_initiate<CompletionToken, detail::stream_signature>(
      [ep = &ep, pp = &p](auto handler, const stream_cfg& c) {
        detail::start_accept_stream(*ep, *pp, c, detail::stream_handler(std::move(handler)));
      },
      token, cfg);
}

}  // namespace arpma
