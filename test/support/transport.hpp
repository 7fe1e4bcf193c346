// Whether the two-sided tests run on iWARP (Soft-iWARP in the guest:
// test/vm/run-in-rxe-vm.sh --siw). iWARP differs from RoCE where the wire
// protocol does (docs/compatibility.md, "iWARP"); the tests check the iWARP
// behaviour there instead of the RoCE one.
#pragma once

#include <infiniband/verbs.h>

namespace arpma::test {

/// True when an RDMA device of this machine is iWARP (the guest has one
/// device; the host, whose tests use the soft provider, has none).
inline bool iwarp() {
  static const bool found = [] {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    bool any = false;
    for (int i = 0; i < n; ++i) any = any || list[i]->transport_type == IBV_TRANSPORT_IWARP;
    if (list != nullptr) ibv_free_device_list(list);
    return any;
  }();
  return found;
}

/// How many connections of default size (a page each for CQ, SQ and RQ) a test may make
/// in one process: `wanted`, or 20 on iWARP. Soft-iWARP (Linux 6.1, rdma-core 44) refuses
/// the queue whose mmap offset is 0x90000 (libsiw's "invalid key"), and the kernel hands
/// out the lowest free offset: a process gets 144 pages of queues (docs/compatibility.md).
inline int connections_on_this_device(int wanted) { return iwarp() && wanted > 20 ? 20 : wanted; }

/// Why a stream test has nothing to run on iWARP.
inline constexpr const char* iwarp_has_no_streams =
    "iWARP has no immediate data, so arpma::stream refuses it with errc::not_supported "
    "(stream_on_iwarp checks that)";

}  // namespace arpma::test
