// The C flavour of the lifecycle: calls that work on an object's own event
// channel directly, on the caller's thread, without any event loop — so a C
// program's fds mean exactly what librpma's do (blocking until it sets
// O_NONBLOCK, readable exactly when the next call will not block).
#pragma once

#include "arpma/conn_cfg.hpp"
#include "arpma/conn_req.hpp"
#include "arpma/connection.hpp"
#include "arpma/endpoint.hpp"
#include "arpma/peer.hpp"
#include "arpma/result.hpp"

#include <memory>
#include <span>
#include <string>

namespace arpma::detail {

struct conn_state;
struct endpoint_state;
struct peer_state;

// They take the states that capi unwrapped from its handles (core never
// unwraps a public handle) and make the handles they create.

/// rpma_conn_req_new: resolves the address and the route on an event channel
/// of the request's own, waiting in poll(2) on it (librpma's blocking calls,
/// without a loop: no descriptor to register, no timer).
result<conn_req> conn_req_new_now(const std::shared_ptr<peer_state>& peer, const std::string& addr,
                                  const std::string& port, const conn_cfg& cfg);
/// rpma_ep_listen: an endpoint on an event channel of its own (blocking fd).
result<endpoint> listen_now(const std::shared_ptr<peer_state>& p, const std::string& addr,
                            const std::string& port);
/// rpma_ep_next_conn_req: reads the endpoint's channel once.
result<conn_req> next_conn_req_now(endpoint_state* ep, const conn_cfg& cfg);
/// rpma_conn_req_connect: connect or accept, without waiting for the outcome.
/// The request is consumed; on failure it is released (an incoming one rejected).
result<connection> connect_now(std::unique_ptr<conn_state> state,
                               std::span<const std::uint8_t> private_data);
/// rpma_conn_next_event: reads the connection's channel once. errc::unknown
/// for an event without a mapping, errc::no_event when none is pending.
result<conn_event> next_event_now(conn_state* state);
/// The fd of the object's own event channel; -1 for none.
int event_fd(const endpoint_state* ep) noexcept;
int event_fd(const conn_state* conn) noexcept;

}  // namespace arpma::detail
