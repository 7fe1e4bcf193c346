// What the public handles keep to themselves: no public state() / release()
// and no public constructor from an internal state (their state is reached
// through detail::access only). Compile-time checks: they fail the build.
#include "arpma/completion_channel.hpp"
#include "arpma/conn_req.hpp"
#include "arpma/connection.hpp"
#include "arpma/cq.hpp"
#include "arpma/endpoint.hpp"
#include "arpma/mr.hpp"
#include "arpma/peer.hpp"
#include "arpma/srq.hpp"

#include <memory>
#include <type_traits>

namespace handles_test {

namespace {

template <class T>
concept exposes_state = requires(T& t) {
  t.state();
};
template <class T>
concept exposes_release = requires(T& t) {
  t.release();
};

static_assert(!exposes_state<arpma::connection> && !exposes_state<arpma::conn_req> &&
              !exposes_state<arpma::endpoint> && !exposes_state<arpma::peer> &&
              !exposes_state<arpma::local_mr> && !exposes_state<arpma::srq> &&
              !exposes_state<arpma::completion_channel> && !exposes_state<arpma::cq>);
static_assert(!exposes_release<arpma::conn_req> && !exposes_release<arpma::connection>);

static_assert(
    !std::is_constructible_v<arpma::connection, std::unique_ptr<arpma::detail::conn_state>>);
static_assert(
    !std::is_constructible_v<arpma::conn_req, std::unique_ptr<arpma::detail::conn_state>>);
static_assert(
    !std::is_constructible_v<arpma::endpoint, std::unique_ptr<arpma::detail::endpoint_state>>);
static_assert(!std::is_constructible_v<arpma::cq, arpma::detail::conn_state*, bool>);
static_assert(!std::is_constructible_v<arpma::cq, arpma::detail::srq_state*>);

// The handles users make themselves: empty by default.
static_assert(std::is_nothrow_default_constructible_v<arpma::connection> &&
              std::is_nothrow_default_constructible_v<arpma::conn_req> &&
              std::is_nothrow_default_constructible_v<arpma::cq>);

}  // namespace

}  // namespace handles_test
