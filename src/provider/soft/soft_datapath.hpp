// The soft provider's verbs objects and data path: memory regions, CQs with
// completion channels, SRQs, and the RC queue pair's two roles — requester
// (application threads post; responses retire the send queue in order) and
// responder (the progress thread executes the peer's requests against
// registered memory). docs/soft-provider.md, "Data path", has the rules.
#pragma once

#include "provider/event_queue.hpp"
#include "provider/provider.hpp"
#include "provider/soft/soft_wire.hpp"

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>

#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <unordered_map>
#include <vector>
#include "provider/ring.hpp"

namespace arpma::provider::soft_dp {

struct soft_pd {
  std::atomic<int> users{0};  ///< QPs, MRs and SRQs made with it
};

struct soft_cq;

struct soft_qp;

/// Called with (epoll fd, token, add): puts the link's socket into the epoll
/// set, or takes it out; false when it could not (the link is closed).
using watch_fn = std::function<bool(int, std::uint64_t, bool)>;

/// A completion channel. Its fd is an epoll set: an eventfd whose readiness
/// means "a CQ fired" (the queue says which one; several CQs may share a
/// channel), and the sockets of its CQs' links, so a thread asleep on the
/// channel wakes for a frame itself and moves it (next_event), instead of
/// the progress thread waking first to complete and then wake it.
struct soft_comp_channel {
  explicit soft_comp_channel(std::error_code& ec) noexcept;
  ~soft_comp_channel();
  soft_comp_channel(const soft_comp_channel&) = delete;
  soft_comp_channel& operator=(const soft_comp_channel&) = delete;
  soft_comp_channel(soft_comp_channel&&) = delete;
  soft_comp_channel& operator=(soft_comp_channel&&) = delete;

  basic_event_queue<soft_cq*> fired;
  int epfd = -1;  ///< the channel's fd: `fired`'s eventfd and the watched sockets
  /// Its CQs, for a reader that finds no event (going to sleep), and for
  /// destroy_comp_channel's EBUSY; `mutex` keeps them alive while a reader
  /// moves their links.
  std::mutex mutex;
  std::vector<soft_cq*> members;
  /// The links in the epoll set, by token (the QP's address). A leaf lock:
  /// taken with the cm id's held (a QP becoming ready), nothing under it
  /// but the id's fd_mutex.
  struct watched_link {
    std::weak_ptr<soft_qp> qp;
    watch_fn watch;
  };
  std::mutex watch_mutex;
  std::unordered_map<std::uint64_t, watched_link> watched;
};

struct soft_cq {
  soft_comp_channel* channel = nullptr;
  int cqe = 0;
  std::atomic<int> qps{0};
  std::mutex mutex;
  ring<work_completion> entries;
  bool armed = false;  ///< one event for the next completion, then disarmed (verbs)
  /// The QPs completing here, whose links a poll of an empty CQ moves.
  std::vector<std::weak_ptr<soft_qp>> users;
};

struct soft_srq {
  soft_pd* pd = nullptr;
  std::uint32_t max_wr = 0;
  std::atomic<int> qps{0};
  std::mutex mutex;
  ring<recv_wr> queue;  // no node allocation as a steady queue moves along
};

/// A posted send-queue WR waiting for its response (or a local error that
/// surfaces once every WR before it has completed).
struct outstanding {
  std::uint64_t wr_id = 0;
  wc_opcode opcode = wc_opcode::send;
  bool signaled = true;
  std::uint32_t byte_len = 0;
  sge local;  ///< where a read's data goes
  wc_status local_error = wc_status::success;
  bool sent = true;  ///< false while held behind a READ that had no slot
};

/// The soft device's max_qp_rd_atom: READs a QP has unanswered as requester,
/// and answers at once as responder, at most (the connection's
/// initiator_depth and responder_resources are capped by it).
inline constexpr std::uint32_t max_reads_in_flight = 16;

/// What a poll of a CQ asks of the links of its QPs.
enum class drive : std::uint8_t {
  poll,     ///< move the received frames here, and keep them for this thread (busy polling)
  peek,     ///< move them once (a poll of an armed CQ: its thread is going to sleep)
  release,  ///< the CQ is armed: the progress thread reads the link again
  /// The CQ is armed and its channel watches the link: its thread wakes for
  /// the next frame itself, so the link stays leased; what is owed goes out.
  sleep,
  /// The channel woke its reader for this link: read it as a poll does,
  /// after a progress thread that is at it.
  wake,
  /// A peek at a link the CQ's channel watches: skipped when the channel's
  /// reader drained the socket last (a later frame wakes the channel).
  peek_watched,
};

/// Where a frame's tail lies in registered memory. What the socket does not
/// take at once is then written from there later, looked up again under the
/// MR table's lock for every write (payload_at), instead of being copied
/// into the queue at post: a deregistered region is never read.
struct payload_source {
  const soft_pd* pd = nullptr;  ///< null: the tail is copied when it must wait
  std::uint32_t key = 0;        ///< the lkey of a request's buffer, the rkey of a READ's target
  bool remote = false;          ///< `key` is an rkey (read with remote_read access)
  std::uint64_t addr = 0;       ///< of the tail's first byte
};

/// What the link of a connected QP offers it, and what the two ends agreed.
struct link_ops {
  /// Writes a frame, then `tail` (the rest of its payload, read where it
  /// lies: registered memory the caller holds the MR table's lock over), to
  /// the link, in order with every frame written before. With `batch` (a
  /// request posted while an earlier one awaits its response) the link may
  /// hold it back to go out with the next ones (soft_link::send_frame).
  /// `source` says where `tail` lies, so a large tail need not be copied.
  std::function<void(soft_wire::frame, std::span<const std::uint8_t> tail, payload_source source,
                     bool batch)>
      send;
  /// Moves the link's received frames on the calling thread (a CQ poll), or
  /// gives the link back to the progress thread (the CQ was armed). Shared,
  /// so a poll takes it from under the QP's lock without copying the
  /// function (a copy of its captures allocates, once per empty poll).
  std::shared_ptr<const std::function<void(drive)>> progress;
  /// READ responses of this QP the link holds, not yet all written.
  std::function<std::size_t()> queued_reads;
  /// Whether the provider's budget for queued READ responses is spent.
  std::function<bool()> read_budget_spent;
  /// Puts the link's socket into a completion channel's epoll set.
  watch_fn watch;
  std::uint32_t max_reads_out = max_reads_in_flight;  ///< min(our depth, their resources)
  std::uint32_t max_reads_in = max_reads_in_flight;   ///< min(our resources, their depth)
};

/// What the responder made of a request frame.
enum class verdict : std::uint8_t { done, rnr_wait, protocol_error };

enum class qp_state : std::uint8_t { reset, ready, error, destroyed };

struct soft_qp {
  soft_pd* pd = nullptr;
  soft_cq* send_cq = nullptr;
  soft_cq* recv_cq = nullptr;
  soft_srq* srq = nullptr;
  qp_config caps;
  std::uint32_t num = 0;

  std::mutex mutex;
  qp_state state = qp_state::reset;
  link_ops link;
  ring<outstanding> sq;
  /// WRs posted while a READ waited for a slot (and every one after it),
  /// sent in order as READ responses free slots, as a NIC stalls its send
  /// queue at a READ past its initiator depth.
  std::deque<send_wr> held;
  std::uint32_t reads_out = 0;  ///< READs sent, not yet answered
  ring<recv_wr> rq;
  bool halted = false;  ///< a local error is queued: later WRs only wait to be flushed
  /// Every completion channel of its CQs watches its link (watch_link).
  std::atomic<bool> watched{false};
};

/// Registers with a random rkey and lkey in the process-wide table.
result<mr*> register_mr(soft_pd* pd, void* addr, std::size_t length, int access);
std::error_code deregister_mr(mr* h) noexcept;
std::uint32_t lkey_of(const mr* h) noexcept;
std::uint32_t rkey_of(const mr* h) noexcept;

std::size_t poll(soft_cq& cq, std::span<work_completion> out);
/// Whether the CQ holds no completion (a look, moving no link).
[[nodiscard]] bool cq_empty(soft_cq& cq);
void arm(soft_cq& cq) noexcept;
/// A reader of the channel found no event: its thread goes to sleep (or
/// back to its loop), so the links of the channel's CQs are the progress
/// thread's again and what no answer carried is acknowledged.
void channel_idle(soft_comp_channel& ch) noexcept;
/// get_cq_event: the next CQ that fired; first the links whose sockets woke
/// the channel are moved on this thread. EAGAIN when none fired and the
/// channel's fd is non-blocking, else waits.
std::error_code next_event(soft_comp_channel& ch, soft_cq*& out);
/// Queues the armed CQ's event on its channel (called with the CQ's lock).
void fire(soft_comp_channel& ch, soft_cq& cq);
/// Forgets the CQ's fired events still queued (it is being destroyed).
void forget_events(soft_cq& cq);

std::error_code post_send(soft_qp& qp, const send_wr& wr);
std::error_code post_recv(soft_qp& qp, const recv_wr& wr);
std::error_code post_srq_recv(soft_srq& srq, const recv_wr& wr);

/// Polls of the QP's CQs may move its link (see soft_cq::users).
void attach(const std::shared_ptr<soft_qp>& qp);
void detach(const std::shared_ptr<soft_qp>& qp);
/// The QP is ready: the completion channels of its CQs watch its link's
/// socket (soft_comp_channel). Without them (no channel, or epoll refused),
/// the progress thread alone wakes for the link, as before.
void watch_link(const std::shared_ptr<soft_qp>& qp);

/// The connection is up: `link` carries the QP's frames from now on.
void make_ready(soft_qp& qp, link_ops link);
/// Disconnect or a dead link: every outstanding WR completes with
/// WR_FLUSH_ERR, later posts too (verbs' error state).
void to_error(soft_qp& qp);
/// destroy_qp: no completion is ever produced again.
void destroy(soft_qp& qp);

/// A data frame from the peer (progress thread). Requests are executed,
/// responses retire the send queue.
verdict on_frame(soft_qp& qp, soft_wire::frame_type type, std::span<const std::uint8_t> payload);
/// For a receiver that reads a large WRITE's payload straight into the
/// target: whether the QP executes requests now (checked before the memory
/// lock is taken: QP, then memory, as everywhere).
bool executes_requests(soft_qp& qp);
/// Registered memory stays registered while this lock is held.
std::shared_lock<std::shared_mutex> lock_memory();
/// `len` bytes of `source`, if that region is still registered for it; call
/// with lock_memory() held and keep it while the bytes are read.
const std::uint8_t* payload_at(const payload_source& source, std::size_t len);
/// The bytes a WRITE to [addr, addr + len) under `rkey` may fill on this QP
/// (every check of an ordinary WRITE), or nullptr: the frame then goes the
/// ordinary way and is refused there. Call with lock_memory() held, and keep
/// it while writing.
std::uint8_t* write_destination(const soft_qp& qp, std::uint32_t rkey, std::uint64_t addr,
                                std::size_t len);
/// The payload is in place: acknowledge the WRITE.
void write_placed(soft_qp& qp);
/// The target of a WRITE being placed went away before its payload had all
/// arrived (deregistered meanwhile): refused as an ordinary WRITE would be.
void write_refused(soft_qp& qp);

/// For a receiver that reads a large SEND's payload straight into the receive
/// it completes: that receive (the front of the QP's own receive queue; an
/// SRQ's are shared, so never), if the QP executes requests and the receive
/// holds `len` bytes; else nullopt (the frame then goes the ordinary way).
std::optional<recv_wr> placing_recv(soft_qp& qp, std::size_t len);
/// The bytes [addr, addr + len) of a receive's buffer under `lkey`, while it
/// is still registered for local writes, or nullptr. Call with lock_memory()
/// held, and keep it while writing.
std::uint8_t* recv_destination(const soft_qp& qp, std::uint32_t lkey, std::uint64_t addr,
                               std::size_t len);
/// The SEND's payload is in its receive (`refused`: its buffer went away
/// meanwhile): the receive completes, as for a SEND taken whole.
void send_placed(soft_qp& qp, std::size_t len, std::optional<std::uint32_t> imm, bool refused);

/// For a requester that reads a large READ response straight into the READ's
/// local buffer: that buffer (lkey, address), if the QP is ready and the
/// oldest outstanding request is a READ of `len` bytes that was sent; else
/// nullopt (the ordinary path then refuses the response).
std::optional<sge> placing_read(soft_qp& qp, std::size_t len);
/// The READ response is in place (`refused`: the local buffer went away
/// meanwhile): the READ completes, as for a response taken whole.
void read_placed(soft_qp& qp, bool refused);

/// The receive a SEND waits for did not come in time: RNR retry exceeded.
void rnr_exhausted(soft_qp& qp);

[[nodiscard]] inline bool is_request(soft_wire::frame_type type) noexcept {
  return type >= soft_wire::frame_type::send && type <= soft_wire::frame_type::flush;
}

/// A request that, executed, completes one of the responder's receives.
[[nodiscard]] inline bool takes_receive(soft_wire::frame_type type) noexcept {
  using soft_wire::frame_type;
  return type == frame_type::send || type == frame_type::send_imm || type == frame_type::write_imm;
}

}  // namespace arpma::provider::soft_dp
