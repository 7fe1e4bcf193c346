// Whether the two-sided tests run on iWARP (Soft-iWARP in the guest:
// test/vm/run-in-rxe-vm.sh --siw). iWARP differs from RoCE where the wire
// protocol does (docs/compatibility.md, "iWARP"); the tests check the iWARP
// behaviour there instead of the RoCE one.
#pragma once

#include "support/test_addr.hpp"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstdlib>
#include <string_view>

namespace arpma::test {

/// True when the tests run on rdma-core and the device that test_addr()
/// belongs to is iWARP: rdma_cm binds an id to that address and says which
/// device it got, so a machine with devices of both kinds answers for the one
/// the tests use. The soft provider, and an address no device has, are not.
inline bool iwarp() {
  static const bool found = [] {
    const char* provider = std::getenv("ARPMA_PROVIDER");  // NOLINT(concurrency-mt-unsafe)
    if (provider != nullptr && std::string_view(provider) == "soft") return false;
    boost::asio::ip::tcp::endpoint addr(boost::asio::ip::make_address(test_addr()), 0);
    rdma_cm_id* id = nullptr;
    bool is_iwarp = false;
    if (rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP) == 0) {
      if (rdma_bind_addr(id, addr.data()) == 0 && id->verbs != nullptr)
        is_iwarp = id->verbs->device->transport_type == IBV_TRANSPORT_IWARP;
      rdma_destroy_id(id);
    }
    return is_iwarp;
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
