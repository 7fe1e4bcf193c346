// The C handles: each wraps the C++ object that does the work.
#pragma once

#include "arpma/conn_req.hpp"
#include "arpma/connection.hpp"
#include "arpma/endpoint.hpp"
#include "arpma/error.hpp"
#include "arpma/mr.hpp"
#include "arpma/peer.hpp"
#include "arpma/srq.hpp"
#include "support/fault.hpp"

#include <librpma.h>

#include <atomic>
#include <new>
#include <system_error>
#include <utility>

struct rpma_peer {
  arpma::peer cxx;
};

struct rpma_conn_req {
  arpma::conn_req cxx;
};

struct rpma_ep {
  arpma::endpoint cxx;
};

/// A CQ of a connection (a view of the conn's state, owned by the conn) or,
/// with `srq` set, the RCQ of that SRQ (owned by its rpma_srq).
struct rpma_cq {
  const rpma_conn* owner = nullptr;
  bool receive = false;
  const arpma::detail::srq_state* srq = nullptr;
};

struct rpma_conn {
  arpma::connection cxx;
  rpma_cq cq;
  rpma_cq rcq;
};

struct rpma_srq {
  arpma::srq cxx;
  rpma_cq rcq;  ///< its `srq` is set
};

struct rpma_mr_local {
  arpma::local_mr cxx;
};

struct rpma_mr_remote {
  arpma::remote_mr cxx;
};

struct rpma_peer_cfg {
  std::atomic<bool> direct_write_to_pmem{false};
};

namespace arpma::capi {

/// A fault point (support/fault.hpp) where the C API allocates a handle: fails as the
/// allocation would, with std::bad_alloc, which guarded() returns as RPMA_E_NOMEM.
inline void alloc_point([[maybe_unused]] const char* what) {
  if (ARPMA_FAULT_POINT(what)) throw std::bad_alloc();
}

/// `new (std::nothrow) T{args...}`, or nullptr at the fault point `what`, as a failed
/// allocation: nothing is taken from `args` then.
template <class T, class... Args>
T* new_handle([[maybe_unused]] const char* what, Args&&... args) noexcept {
  if (ARPMA_FAULT_POINT(what)) return nullptr;
  return new (std::nothrow) T{std::forward<Args>(args)...};
}

/// Runs `body` at the C boundary: nothing may unwind into a C caller.
template <class Body>
int guarded(Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return RPMA_E_NOMEM;
  } catch (const std::system_error& e) {  // e.g. the event loop could not get an fd
    return to_rpma_error(e.code());
  } catch (...) {
    return RPMA_E_UNKNOWN;
  }
}

}  // namespace arpma::capi
