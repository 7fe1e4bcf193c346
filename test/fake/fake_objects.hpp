// The fake provider's objects, shared by its files (fake_provider.cpp: the
// connection manager and resources; fake_datapath.cpp: the data path).
#pragma once

#include "fake/fake_provider.hpp"
#include "provider/event_queue.hpp"

#include <unistd.h>

#include <deque>
#include <vector>

namespace arpma::test {

struct fake_provider::channel {
  prov::event_queue queue;
  int ids = 0;
};

struct fake_provider::id {
  channel* owner = nullptr;
  std::uint64_t context = 0;
  bool addr_requested = false;
  std::uint16_t port = 0;  // bound to, 0 when not bound
  bool listening = false;
  id* listener = nullptr;     // born from a CONNECT_REQUEST of this listener...
  bool request_read = false;  // ...which has been read
  bool rejected = false;
  bool peer_disconnected = false;  // a DISCONNECTED was scripted for it (the peer's DREQ)
  bool has_qp = false;
  prov::qp_config qp;
  pd_obj* qp_pd = nullptr;
  std::uint32_t qp_num = 0;
  std::vector<posted_wr> outstanding;  ///< posted, not yet released
};

struct fake_provider::pd_obj {
  int qps = 0;
};

struct fake_provider::mr_obj {
  int access = 0;
};

struct fake_provider::comp_obj {
  int fd = -1;  ///< an eventfd semaphore: one count per CQ that fired
  int cqs = 0;
  std::deque<cq_obj*> fired;  ///< in the order they fired
  ~comp_obj() {
    if (fd >= 0) ::close(fd);
  }
};

struct fake_provider::srq_obj {
  pd_obj* pd = nullptr;
  int qps = 0;
};

struct fake_provider::cq_obj {
  comp_obj* channel = nullptr;
  int cqe = 0;
  bool armed = false;
  int qps = 0;
  std::deque<prov::work_completion> done;  ///< released, not yet polled
  unsigned unacked = 0;                    ///< events handed out, not acknowledged
};

}  // namespace arpma::test
