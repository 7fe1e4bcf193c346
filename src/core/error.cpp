#include "arpma/error.hpp"
#include "core/error_internal.hpp"

#include <cerrno>
#include <string>

namespace arpma {

const char* detail::describe(int value) noexcept {
  switch (static_cast<errc>(value)) {
    case errc::unknown: return "Unknown error";
    case errc::not_supported: return "Not supported";
    case errc::provider: return "Provider error occurred";
    case errc::no_memory: return "Out of memory";
    case errc::invalid_argument: return "Invalid argument";
    case errc::no_completion: return "No next completion available";
    case errc::no_event: return "No next event available";
    case errc::again: return "Temporary error, try again";
    case errc::shared_channel: return "Completion channel is shared";
    case errc::not_shared_channel: return "Completion channel is not shared";
  }
  return value == 0 ? "Success" : "Unknown error";
}

namespace {

// A code that came from the transport rather than from arpma itself.
bool is_provider_code(const std::error_code& code) noexcept {
  if (!code) return false;
  const auto& cat = code.category();
  if (cat == std::system_category() || cat == std::generic_category())
    return code.value() != ECANCELED;
  return cat != error_category();
}

class category final : public std::error_category {
 public:
  [[nodiscard]] const char* name() const noexcept override { return "arpma"; }
  [[nodiscard]] std::string message(int value) const override { return detail::describe(value); }
  [[nodiscard]] bool equivalent(const std::error_code& code,
                                int condition) const noexcept override {
    if (code.category() == *this) return code.value() == condition;
    return condition == static_cast<int>(errc::provider) && is_provider_code(code);
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const category instance;
  return instance;
}

std::error_condition make_error_condition(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }

namespace {

class wc_category final : public std::error_category {
 public:
  [[nodiscard]] const char* name() const noexcept override { return "arpma.wc"; }
  [[nodiscard]] std::string message(int value) const override {
    switch (static_cast<wc_errc>(value)) {
      case wc_errc::loc_len_err: return "local length error";
      case wc_errc::loc_qp_op_err: return "local QP operation error";
      case wc_errc::loc_eec_op_err: return "local EE context operation error";
      case wc_errc::loc_prot_err: return "local protection error";
      case wc_errc::wr_flush_err: return "Work Request Flushed Error";
      case wc_errc::mw_bind_err: return "memory management operation error";
      case wc_errc::bad_resp_err: return "bad response error";
      case wc_errc::loc_access_err: return "local access error";
      case wc_errc::rem_inv_req_err: return "remote invalid request error";
      case wc_errc::rem_access_err: return "remote access error";
      case wc_errc::rem_op_err: return "remote operation error";
      case wc_errc::retry_exc_err: return "transport retry counter exceeded";
      case wc_errc::rnr_retry_exc_err: return "RNR retry counter exceeded";
      case wc_errc::loc_rdd_viol_err: return "local RDD violation error";
      case wc_errc::rem_inv_rd_req_err: return "remote invalid RD request";
      case wc_errc::rem_abort_err: return "aborted error";
      case wc_errc::inv_eecn_err: return "invalid EE context number";
      case wc_errc::inv_eec_state_err: return "invalid EE context state";
      case wc_errc::fatal_err: return "fatal error";
      case wc_errc::resp_timeout_err: return "response timeout error";
      case wc_errc::general_err: return "general error";
      case wc_errc::tm_err: return "TM error";
      case wc_errc::tm_rndv_incomplete: return "TM software rendezvous";
    }
    return "unknown work completion status";
  }
};

}  // namespace

const std::error_category& completion_category() noexcept {
  static const wc_category instance;
  return instance;
}

std::error_code make_error_code(wc_errc e) noexcept {
  return {static_cast<int>(e), completion_category()};
}

namespace detail {

error_code to_completion_error(const std::error_code& ec) noexcept {
  if (ec.category() == std::system_category())
    return {ec.value(), boost::system::system_category()};
  if (ec.category() == std::generic_category())
    return {ec.value(), boost::system::generic_category()};
  return ec;
}

}  // namespace detail

int to_rpma_error(const std::error_code& ec) noexcept {
  if (!ec) return 0;
  if (ec.category() == error_category()) return ec.value();
  if (is_provider_code(ec)) return static_cast<int>(errc::provider);
  return static_cast<int>(errc::unknown);
}

}  // namespace arpma
