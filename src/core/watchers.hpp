// Who waits on a state's events: operations in flight, held weakly (they own
// themselves through their pending waits).
#pragma once

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

namespace arpma::detail {

/// Something waiting on a state's events (an operation in flight). `poke`
/// runs on the loop after each event is queued; `gone` when the state is
/// destroyed under it.
class conn_watcher {
 public:
  virtual void poke() = 0;
  virtual void gone() = 0;

 protected:
  ~conn_watcher() = default;
};

class watcher_list {
 public:
  void add(const std::shared_ptr<conn_watcher>& w) { list_.push_back(w); }

  void remove(const conn_watcher* w) noexcept {
    std::erase_if(list_, [w](const auto& weak) {
      auto locked = weak.lock();
      return !locked || locked.get() == w;
    });
  }

  /// Pokes every live watcher (a snapshot: a poke may add or remove).
  void poke_all() {
    std::erase_if(list_, [](const auto& weak) { return weak.expired(); });
    const auto snapshot = list_;
    for (const auto& weak : snapshot)
      if (auto w = weak.lock()) w->poke();
  }

  /// Tells every watcher that the state is gone, and forgets them.
  void gone_all() noexcept {
    for (auto& weak : std::exchange(list_, {}))
      if (auto w = weak.lock()) w->gone();
  }

 private:
  std::vector<std::weak_ptr<conn_watcher>> list_;
};

}  // namespace arpma::detail
