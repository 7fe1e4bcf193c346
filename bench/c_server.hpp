// The server side of benchmarks that measure a client: librpma's C API on one
// thread, accepting `connections` in turn, each with its region's descriptor
// as private data, holding them all open, then waiting for each to close.
#pragma once

#include "arpma/mr.hpp"

#include <librpma.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace arpma::bench {

inline void serve_check(int rc, const char* what) {
  if (rc == 0) return;
  std::fprintf(stderr, "bench server: %s: %s\n", what, rpma_err_2str(rc));
  std::exit(1);  // NOLINT(concurrency-mt-unsafe): a benchmark that cannot run stops
}

/// Serves `connections` clients on `addr`:`port` with a `region`-byte
/// write destination; sets `listening` once clients may connect.
inline void serve_connections(rpma_peer* peer, const char* addr, const char* port, int connections,
                              std::size_t region, std::atomic<bool>& listening) {
  rpma_ep* ep = nullptr;
  serve_check(rpma_ep_listen(peer, addr, port, &ep), "listen");
  std::vector<char> memory(region);
  rpma_mr_local* mr = nullptr;
  serve_check(rpma_mr_reg(peer, memory.data(), memory.size(), RPMA_MR_USAGE_WRITE_DST, &mr),
              "mr_reg");
  char desc[mr_descriptor_size];
  serve_check(rpma_mr_get_descriptor(mr, desc), "descriptor");
  listening = true;
  std::vector<rpma_conn*> conns;
  for (int i = 0; i < connections; ++i) {
    rpma_conn_req* req = nullptr;
    serve_check(rpma_ep_next_conn_req(ep, nullptr, &req), "next_conn_req");
    const rpma_conn_private_data pdata{desc, sizeof desc};
    rpma_conn* conn = nullptr;
    serve_check(rpma_conn_req_connect(&req, &pdata, &conn), "accept");
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    serve_check(rpma_conn_next_event(conn, &ev), "established");
    conns.push_back(conn);
  }
  for (rpma_conn* conn : conns) {
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    (void)rpma_conn_next_event(conn, &ev);  // closed
    (void)rpma_conn_disconnect(conn);
    (void)rpma_conn_delete(&conn);
  }
  (void)rpma_mr_dereg(&mr);
  (void)rpma_ep_shutdown(&ep);
}

}  // namespace arpma::bench
