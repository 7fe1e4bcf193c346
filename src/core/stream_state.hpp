// The engine of arpma::stream: credits, slots and the wire format of
// docs/stream.md, driven from the connection's completion queue.
#pragma once

#include "arpma/buffer.hpp"
#include "arpma/conn_req.hpp"
#include "arpma/connection.hpp"
#include "arpma/cq.hpp"
#include "arpma/mr.hpp"
#include "arpma/stream.hpp"

#include "core/asio.hpp"
#include "core/cm_channel.hpp"
#include "core/op_slot.hpp"
#include "core/watchers.hpp"
#include "provider/provider.hpp"

#include <boost/asio/posix/stream_descriptor.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace arpma::detail {

/// The 32-bit immediate of every stream message.
struct stream_imm {
  static constexpr std::uint32_t credits_mask = 0xfffU;
  static constexpr unsigned ack_shift = 12;
  static constexpr std::uint32_t ack_mask = 0xffU;
  static constexpr std::uint32_t reserved = 0x3ff00000U;
  static constexpr std::uint32_t control = 1U << 30;
  static constexpr std::uint32_t fin = 1U << 31;
};

/// Each side's shape, in the private data of connect and accept, so that
/// neither sends the other more messages or bigger ones than it posted.
inline constexpr std::size_t stream_hello_size = 16;
[[nodiscard]] std::array<std::uint8_t, stream_hello_size> encode_hello(const stream_cfg& cfg);
/// The peer's shape, or none for data that is no stream's hello.
[[nodiscard]] std::optional<stream_cfg> decode_hello(std::span<const std::uint8_t> data);

/// Owned by the stream handle, and while it waits by its descriptor wait
/// (which holds it, as an Asio operation holds its handler's state).
class stream_state : public std::enable_shared_from_this<stream_state>,
                     public loop_shutdown_listener,
                     public conn_watcher {
 public:
  explicit stream_state(const stream_cfg& cfg) : cfg_(cfg) {}
  stream_state(const stream_state&) = delete;
  stream_state& operator=(const stream_state&) = delete;
  ~stream_state();

  /// Allocates and registers the slots with `p`.
  std::error_code prepare(const peer& p);
  /// Posts every receive on the request, before it connects.
  std::error_code post_receives(conn_req& req);
  /// Takes the established connection and the peer's shape.
  void attach(connection conn, const stream_cfg& peer);

  [[nodiscard]] const boost::asio::any_io_executor& executor() const noexcept { return ex_; }
  [[nodiscard]] connection& conn() noexcept { return conn_; }
  [[nodiscard]] const stream_cfg& cfg() const noexcept { return cfg_; }
  /// Its engine is on the stack (a handler of it is running).
  [[nodiscard]] bool busy() const noexcept { return running_; }

  void start_read(const stream_buffers<boost::asio::mutable_buffer>& bufs,
                  stream_io_handler handler, bool local);
  void start_write(const stream_buffers<boost::asio::const_buffer>& bufs, stream_io_handler handler,
                   bool local);
  void shutdown();
  void close() noexcept;
  /// The io_context is going: let go of the descriptor before its reactor.
  void abandon() noexcept override;
  /// A connection event arrived (a disconnect, the link lost).
  void poke() override;
  void gone() override {}

 private:
  template <class Buffer>
  struct pending {
    stream_buffers<Buffer> bufs;
    stream_io_handler handler;
    bool local = false;     ///< the handler runs on the stream's executor
    bool immediate = true;  ///< its initiating function has not returned
  };
  struct ready {
    stream_io_handler handler;
    error_code ec;
    std::size_t n = 0;
    bool local = false;
    bool immediate = false;
  };
  struct filled {
    std::uint32_t slot = 0;
    std::uint32_t len = 0;
    std::uint32_t off = 0;
  };
  enum class which { read, write };
  struct cancel_op {
    stream_state* state;
    which op;
    void operator()(boost::asio::cancellation_type type) const;
  };

  void run();
  void drain();
  void on_completion(const completion& c);
  void on_receive(const completion& c);
  void pump();
  void pump_read();
  void pump_write();
  void send_control();
  void send_fin();
  void arm_wait();
  void on_readable(const error_code& ec);
  void spin();
  void hold_events(bool wanted) noexcept;
  void settle();
  void fail(error_code ec);
  void finish_linger();
  void abort_now() noexcept;
  template <class Buffer>
  void finish(std::optional<pending<Buffer>>& op, std::optional<ready>& out, error_code ec,
              std::size_t n);
  template <class Buffer>
  void drop(std::optional<pending<Buffer>>& op) noexcept;
  void cancel(which op);
  void deliver(std::optional<ready>& r);

  std::size_t copy_out(const stream_buffers<boost::asio::mutable_buffer>& bufs);
  std::size_t copy_in(const stream_buffers<boost::asio::const_buffer>& bufs);
  std::error_code send_msg(const local_buffer& src, std::uint64_t wr_id, std::uint32_t flags);
  std::error_code repost(std::uint32_t slot);
  [[nodiscard]] std::uint32_t control_limit() const noexcept;
  [[nodiscard]] bool unread() const noexcept { return filled_count_ > 0; }

  stream_cfg cfg_;
  stream_cfg peer_;
  std::vector<std::uint8_t> recv_mem_;
  std::vector<std::uint8_t> send_mem_;
  local_mr recv_mr_;
  local_mr send_mr_;
  // Declared after the regions: the connection (its queue pair) goes first.
  connection conn_;
  cq cq_;
  boost::asio::any_io_executor ex_;
  // The CQ's completion channel, watched by a descriptor kept for the
  // stream's life: a wait costs no allocation and no epoll_ctl(ADD/DEL).
  provider::provider* prov_ = nullptr;
  provider::comp_channel* channel_ = nullptr;
  op_slot wait_slot_;  ///< fd_'s one wait (declared first: it outlives what fd_ cancels)
  op_slot spin_slot_;  ///< the busy poll's queued turn
  std::optional<asio::posix::stream_descriptor> fd_;
  // The connection's event channel, held (watched) while an operation waits,
  // so a peer that dies or disconnects is heard of on every provider (rxe's
  // queue pair goes to error only when the disconnect is answered).
  std::shared_ptr<cm_channel> cm_;
  bool holding_cm_ = false;
  /// Completions posted and not yet run: they may start the next operation,
  /// so the waits stay armed until they ran.
  std::size_t posted_ = 0;

  // Receiving.
  std::vector<filled> filled_;  ///< FIFO ring of received data, in arrival order
  std::size_t filled_head_ = 0;
  std::size_t filled_count_ = 0;
  std::uint32_t owed_ = 0;         ///< data credits re-posted, not yet returned
  std::uint8_t control_seen_ = 0;  ///< control messages received and re-posted (the ack)
  bool fin_received_ = false;

  // Sending.
  std::uint32_t credits_ = 0;
  std::vector<std::uint32_t> free_slots_;
  std::uint8_t control_sent_ = 0;
  std::uint8_t control_acked_ = 0;
  std::uint32_t sends_in_flight_ = 0;
  bool shutdown_ = false;
  bool fin_sent_ = false;

  error_code failure_;
  bool closed_ = false;
  bool lingering_ = false;
  bool running_ = false;
  bool rerun_ = false;
  bool waiting_ = false;
  bool abandoned_ = false;
  bool spinning_ = false;  ///< a busy poll is posted
  std::chrono::steady_clock::time_point last_progress_{};

  std::optional<pending<boost::asio::mutable_buffer>> read_;
  std::optional<pending<boost::asio::const_buffer>> write_;
  std::optional<ready> read_done_;
  std::optional<ready> write_done_;
};

}  // namespace arpma::detail
