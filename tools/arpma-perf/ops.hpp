// The client's side of one connection and the one operation each test measures.
#pragma once

#include "args.hpp"

#include <arpma/conn_cfg.hpp>
#include <arpma/connection.hpp>
#include <arpma/mr.hpp>
#include <arpma/peer.hpp>

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

namespace arpma_perf {

/// One connection and the memory its operations use: [0, max) is the source of writes and
/// sends and the destination of reads (shared by the operations in flight: the data is not
/// checked); [max, 2 max) takes send lat's echoes.
struct link {
  arpma::connection conn;
  arpma::remote_mr remote;  ///< the server's region
  std::vector<char> memory;
  arpma::local_mr mr;
  std::size_t max_size = 0;
  std::uint64_t issued = 0;     ///< operations started in the current phase
  std::uint32_t sends_out = 0;  ///< send lat: sends whose completion has not come yet
  std::error_code send_error;   ///< send lat: the first send that failed
};

/// Queue sizes for qd operations in flight (a flush test posts two work requests each).
[[nodiscard]] arpma::conn_cfg client_cfg(const options& o);

/// Decodes the server's region from the connection's private data, checks it holds
/// `max_size`, registers the link's memory and sets the poll mode; what went wrong, or empty.
[[nodiscard]] std::string prepare_link(link& l, const arpma::peer& peer, const options& o,
                                       std::size_t max_size);

/// The measured operation of `o.op` / `o.test` with a message of `size`; `slot` spreads the
/// operations in flight over the server's region.
boost::asio::awaitable<std::error_code> one_op(link& l, const options& o, std::size_t size,
                                               std::uint32_t slot);

}  // namespace arpma_perf
