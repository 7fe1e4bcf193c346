// The base of operations that wait for rdma_cm events rather than for Asio.
#pragma once

#include "arpma/detail/execute_later.hpp"
#include "arpma/error.hpp"
#include "core/asio.hpp"
#include "core/cm_channel.hpp"
#include "core/error_internal.hpp"

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/system_executor.hpp>

#include <memory>
#include <optional>
#include <system_error>
#include <utility>

namespace arpma::detail {

/// Calls `handler` with `ec` and `results` from `ex`'s queue, on the
/// handler's associated executor.
template <class Handler, class... Results>
void post_completion(const asio::any_io_executor& ex, Handler handler, const std::error_code& ec,
                     Results... results) {
  asio::post(ex, [ex, h = std::move(handler), error = to_completion_error(ec),
                  ... r = std::move(results)]() mutable {
    auto executor = asio::get_associated_executor(h, ex);
    asio::dispatch(executor, [h = std::move(h), error, ... r = std::move(r)]() mutable {
      std::move(h)(error, std::move(r)...);
    });
  });
}

/// Work counted on an erased handler's associated executor while its
/// operation waits (Asio's handler_work): empty when that executor is `io`,
/// the object's own, whose pending wait is the work already.
using handler_work = std::optional<asio::any_completion_executor>;

template <class Handler>
[[nodiscard]] handler_work track_handler_work(const Handler& handler,
                                              const asio::any_io_executor& io) {
  if (!static_cast<bool>(io)) return std::nullopt;
  auto ex = asio::get_associated_executor(handler, io);
  // The analyzer loses the shared target of an executor too big to be held
  // in place (a strand's) and reports it leaked; any_executor releases it.
  // NOLINTNEXTLINE(clang-analyzer-cplusplus.NewDeleteLeaks)
  if (ex == asio::any_completion_executor(std::nothrow, io)) return std::nullopt;
  return asio::prefer(ex, asio::execution::outstanding_work_t::tracked);
}

/// post_completion for an operation that counted `work`: the count ends once
/// the handler is on its way to that executor.
template <class Handler, class... Results>
void post_completion(const asio::any_io_executor& ex, handler_work work, Handler handler,
                     const std::error_code& ec, Results... results) {
  if (!work) return post_completion(ex, std::move(handler), ec, std::move(results)...);
  asio::post(ex, [w = std::move(*work), h = std::move(handler), error = to_completion_error(ec),
                  ... r = std::move(results)]() mutable {
    asio::dispatch(w, [h = std::move(h), error, ... r = std::move(r)]() mutable {
      std::move(h)(error, std::move(r)...);
    });
  });
}

/// Completes `handler` without an operation (bad arguments): posted from the
/// calling thread straight to its associated executor (the system executor
/// when it has none), never inside the initiating function. Never through a
/// hop on the system executor's thread: that thread would still be inside the
/// loop's wake-up when the handler, run and done, lets the loop be destroyed.
template <class Handler, class... Results>
void fail_at_once(Handler handler, const std::error_code& ec, Results... results) {
  const auto ex = asio::get_associated_executor(handler);
  execute_later(ex,
                [h = std::move(handler), error = to_completion_error(ec),
                 ... r = std::move(results)]() mutable { std::move(h)(error, std::move(r)...); });
}

/// Completes `handler` with an error found before its operation began: on
/// `loop`, the io_context of the object it was called on, as every other
/// completion of that object (on the system executor's thread it would race
/// with the loop's thread); through fail_at_once when the object has none.
template <class Handler, class... Results>
void fail_on_loop(const asio::any_io_executor& loop, Handler handler, const std::error_code& ec,
                  Results... results) {
  if (static_cast<bool>(loop) && loop.target<asio::system_executor>() == nullptr)
    return post_completion(loop, std::move(handler), ec, std::move(results)...);
  fail_at_once(std::move(handler), ec, std::move(results)...);
}

/// The error of a cancelled operation, as every Asio operation reports it.
[[nodiscard]] inline std::error_code aborted() noexcept {
  return boost::system::error_code(asio::error::operation_aborted);
}

/// An operation completed by something other than Asio (an event routed by a
/// cm_channel). While it waits it owns itself, and is linked into its
/// io_context's arpma service (parked_link: no allocation, no timer): a
/// destroyed io_context destroys it, and its handler, uncalled, like any
/// pending Asio operation. `complete` runs the handler once, always through
/// post, so no handler ever runs inside the code that completed it; a
/// handler bound to another executor has work counted there meanwhile.
///
/// `Derived` provides `void cancelled()` (called on the executor).
template <class Derived, class... Results>
class parked_op : public std::enable_shared_from_this<Derived>, public parked_link {
 public:
  using handler_type = asio::any_completion_handler<void(error_code, Results...)>;

  parked_op(const parked_op&) = delete;
  parked_op& operator=(const parked_op&) = delete;

  [[nodiscard]] bool done() const noexcept { return done_; }
  [[nodiscard]] const asio::any_io_executor& executor() const noexcept { return ex_; }

  void abandon_parked() noexcept override {
    done_ = true;
    auto self = std::move(self_);  // the last reference, most likely: destroyed here
  }

 protected:
  parked_op(asio::any_io_executor ex, handler_type handler)
      : ex_(std::move(ex)),
        handler_(std::move(handler)),
        work_(track_handler_work(handler_, ex_)) {}
  ~parked_op() {
    if (held_) held_->release();
  }

  /// Holds the operation until `complete`; hooks cancellation of the
  /// `honoured` types.
  void park(asio::cancellation_type honoured) {
    if (park_on_loop(ex_, *this)) self_ = this->shared_from_this();
    auto slot = asio::get_associated_cancellation_slot(handler_);
    if (!slot.is_connected()) return;
    slot.assign([weak = this->weak_from_this(), honoured](asio::cancellation_type type) {
      if ((type & honoured) == asio::cancellation_type::none) return;
      if (auto self = weak.lock())
        asio::post(self->ex_, [self] {
          if (!self->done_) self->cancelled();
        });
    });
  }

  /// Keeps `channel` watched until completion: the loop reads events while
  /// the operation waits, and only then.
  void hold(std::shared_ptr<cm_channel> channel) {
    if (held_ == channel) return;
    if (held_) held_->release();
    held_ = std::move(channel);
    held_->hold();
  }

  void complete(const std::error_code& ec, Results... results) {
    if (done_) return;
    done_ = true;
    if (held_) std::exchange(held_, nullptr)->release();
    auto slot = asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.clear();
    unpark_from_loop(ex_, *this);
    auto self = std::move(self_);  // alive until this returns
    post_completion(ex_, std::move(work_), std::move(handler_), ec, std::move(results)...);
  }

 private:
  asio::any_io_executor ex_;
  handler_type handler_;
  handler_work work_;
  std::shared_ptr<cm_channel> held_;
  std::shared_ptr<Derived> self_;  ///< while parked: the operation owns itself
  bool done_ = false;
};

/// True when `ex` can run an operation: an io_context's executor (the
/// system executor, the default of handlers without one, cannot).
[[nodiscard]] inline bool runs_operations(const asio::any_io_executor& ex) noexcept {
  return static_cast<bool>(ex) && ex.target<asio::system_executor>() == nullptr;
}

}  // namespace arpma::detail
