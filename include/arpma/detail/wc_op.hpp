// A data-path operation waiting for its work completion. Its storage comes
// from the handler's associated allocator (Asio's recycling allocator when the
// handler names none, as Asio's own operations do), it is type-erased by one
// function pointer (no virtual table, no second block), and it completes
// under Asio's handler_work rules: work is counted on the handler's executor
// while it waits, and the handler runs there.
#pragma once

#include "arpma/completion.hpp"
#include "arpma/detail/execute_later.hpp"
#include "arpma/error.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/recycling_allocator.hpp>
#include <boost/asio/system_executor.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

namespace arpma::detail {

/// The core's view of an operation: what it completes or drops.
class wc_op {
 public:
  wc_op(const wc_op&) = delete;
  wc_op& operator=(const wc_op&) = delete;

  /// Frees the operation, then runs its handler with (`ec`, `c`): at once
  /// when the handler's executor is `io`, the executor the caller runs on
  /// (Asio calls its own handlers so), else dispatched to that executor.
  void complete(const boost::asio::any_io_executor& io, const error_code& ec, const completion& c) {
    func_(this, &io, ec, c);
  }
  /// Frees the operation, then posts its handler with (`ec`, `c`) to the
  /// handler's executor (the system executor when it names none): for an
  /// operation that failed before it reached any loop, on the initiating
  /// thread, so that no other thread touches the handler's io_context.
  void fail_unstarted(const error_code& ec) { func_(this, &no_loop(), ec, completion()); }
  /// Frees the operation and its handler without a call (the loop is gone).
  void destroy() noexcept { func_(this, nullptr, error_code(), completion()); }
  /// A terminal or partial cancellation was asked for.
  [[nodiscard]] bool cancelled() const noexcept {
    return cancelled_.load(std::memory_order_relaxed);
  }

 protected:
  using func_type = void (*)(wc_op*, const boost::asio::any_io_executor*, const error_code&,
                             const completion&);
  explicit wc_op(func_type func) noexcept : func_(func) {}
  ~wc_op() = default;

  static const boost::asio::any_io_executor& no_loop() noexcept {
    static const boost::asio::any_io_executor none;
    return none;
  }

  // Set by the handler's cancellation slot; read when the completion comes
  // (RDMA cannot take a posted work request back).
  struct cancel_handler {
    wc_op* op;
    void operator()(boost::asio::cancellation_type type) const noexcept {
      using ct = boost::asio::cancellation_type;
      if ((type & (ct::terminal | ct::partial)) != ct::none)
        op->cancelled_.store(true, std::memory_order_relaxed);
    }
  };

 private:
  func_type func_;
  std::atomic<bool> cancelled_{false};
};

/// Whether `ex` (a handler's executor) is `io` itself. Compared as its own
/// type: converting it to any_io_executor could allocate (a strand does).
template <class Executor>
[[nodiscard]] bool same_executor(const Executor& ex,
                                 const boost::asio::any_io_executor& io) noexcept {
  if constexpr (std::is_same_v<Executor, boost::asio::any_io_executor>) {
    return ex == io;
  } else {
    const auto* target = io.template target<Executor>();
    return target != nullptr && *target == ex;
  }
}

/// Whether `handler` runs on `ex`, asked while its type is known: once it
/// is erased in an any_completion_handler, Boost 1.81 answers with a heap
/// block per query.
template <class Handler>
[[nodiscard]] bool runs_on(const Handler& handler, const boost::asio::any_io_executor& ex) {
  return static_cast<bool>(ex) &&
         same_executor(boost::asio::get_associated_executor(handler, ex), ex);
}

template <class Handler>
using wc_handler_executor_t =
    boost::asio::associated_executor_t<Handler, boost::asio::any_io_executor>;

/// The handler-typed operation; made by make_wc_op.
template <class Handler>
class wc_op_impl final : public wc_op {
  using work_type = std::decay_t<decltype(boost::asio::prefer(
      std::declval<const wc_handler_executor_t<Handler>&>(),
      boost::asio::execution::outstanding_work_t::tracked))>;

 public:
  using allocator_type =
      boost::asio::associated_allocator_t<Handler, boost::asio::recycling_allocator<void>>;

  wc_op_impl(Handler&& handler, const boost::asio::any_io_executor& io)
      : wc_op(&do_complete), handler_(std::move(handler)) {
    auto slot = boost::asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.template emplace<cancel_handler>(cancel_handler{this});
    // Work on the I/O executor is the object's (its pending wait); another
    // executor is told that a handler is coming.
    auto ex = boost::asio::get_associated_executor(handler_, io);
    if constexpr (std::is_same_v<decltype(ex), boost::asio::any_io_executor>)
      if (!ex) return;  // no loop at all (an empty object): nothing to count on
    if (!same_executor(ex, io))
      work_.emplace(boost::asio::prefer(ex, boost::asio::execution::outstanding_work_t::tracked));
  }

  [[nodiscard]] allocator_type get_allocator() const noexcept {
    return boost::asio::get_associated_allocator(handler_,
                                                 boost::asio::recycling_allocator<void>());
  }

 private:
  using rebound = typename std::allocator_traits<allocator_type>::template rebind_alloc<wc_op_impl>;

  static void do_complete(wc_op* base, const boost::asio::any_io_executor* io, const error_code& ec,
                          const completion& c) {
    auto* self = static_cast<wc_op_impl*>(base);
    auto slot = boost::asio::get_associated_cancellation_slot(self->handler_);
    if (slot.is_connected()) slot.clear();
    // The storage goes back before the call, so the handler's next
    // operation can take the same block.
    Handler handler(std::move(self->handler_));
    std::optional<work_type> work(std::move(self->work_));
    rebound alloc(self->get_allocator());
    std::allocator_traits<rebound>::destroy(alloc, self);
    std::allocator_traits<rebound>::deallocate(alloc, self, 1);
    if (io == nullptr) return;
    if (io == &no_loop()) return post_unstarted(std::move(handler), std::move(work), ec, c);
    if (!work) {
      std::move(handler)(ec, c);
      return;
    }
    boost::asio::dispatch(*work,
                          [h = std::move(handler), ec, c]() mutable { std::move(h)(ec, c); });
  }

  // Posted, never dispatched: this runs inside the initiating function.
  static void post_unstarted(Handler handler, std::optional<work_type> work, const error_code& ec,
                             const completion& c) {
    auto call = [h = std::move(handler), ec, c]() mutable { std::move(h)(ec, c); };
    if (!work) return execute_later(boost::asio::system_executor(), std::move(call));
    execute_later(*work, std::move(call));
  }

  Handler handler_;
  std::optional<work_type> work_;
};

/// Makes the operation for `handler` in storage from its allocator; `io` is
/// the executor of the object it is started on.
template <class Handler>
wc_op* make_wc_op(Handler&& handler, const boost::asio::any_io_executor& io) {
  using op = wc_op_impl<std::decay_t<Handler>>;
  typename std::allocator_traits<typename op::allocator_type>::template rebind_alloc<op> alloc(
      boost::asio::get_associated_allocator(handler, boost::asio::recycling_allocator<void>()));
  op* p = std::allocator_traits<decltype(alloc)>::allocate(alloc, 1);
  try {
    std::allocator_traits<decltype(alloc)>::construct(alloc, p, std::forward<Handler>(handler), io);
  } catch (...) {
    std::allocator_traits<decltype(alloc)>::deallocate(alloc, p, 1);
    throw;
  }
  return p;
}

}  // namespace arpma::detail
