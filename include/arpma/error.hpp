// arpma error model: one condition enum that mirrors librpma's RPMA_E_* values,
// while operations keep the most precise std::error_code they have.
#pragma once

#include <boost/system/error_code.hpp>

#include <system_error>

namespace arpma {

/// Error classes of librpma 1.3. The numeric values are the RPMA_E_* codes,
/// so `static_cast<int>(errc::invalid_argument) == RPMA_E_INVAL`.
///
/// `errc` is a std::error_condition enum: compare any error_code against it.
/// `ec == errc::provider` holds for every failure reported by rdma-core or the
/// soft provider (system/generic errno codes, except ECANCELED), so callers can
/// test "what class" and still print "what exactly" (`ec.message()`).
enum class errc : int {
  unknown = -100000,             ///< RPMA_E_UNKNOWN
  not_supported = -100001,       ///< RPMA_E_NOSUPP
  provider = -100002,            ///< RPMA_E_PROVIDER
  no_memory = -100003,           ///< RPMA_E_NOMEM
  invalid_argument = -100004,    ///< RPMA_E_INVAL
  no_completion = -100005,       ///< RPMA_E_NO_COMPLETION
  no_event = -100006,            ///< RPMA_E_NO_EVENT
  again = -100007,               ///< RPMA_E_AGAIN
  shared_channel = -100008,      ///< RPMA_E_SHARED_CHANNEL
  not_shared_channel = -100009,  ///< RPMA_E_NOT_SHARED_CHNL
};

/// The error type of every completion signature. It is Boost.Asio's own, so
/// completion tokens treat it as an error (use_awaitable throws, use_future
/// sets an exception, as_tuple returns it); it wraps any std::error_code
/// without loss, converts back implicitly (a handler may take std::error_code)
/// and compares with `errc`.
using error_code = boost::system::error_code;

/// The category of codes that arpma itself originates (argument checks,
/// allocation failures, protocol states). Its conditions are the `errc` values.
[[nodiscard]] const std::error_category& error_category() noexcept;

/// An error_condition for `e` (used by `ec == errc::x` comparisons).
[[nodiscard]] std::error_condition make_error_condition(errc e) noexcept;

/// An error_code for an error that arpma itself detected.
[[nodiscard]] std::error_code make_error_code(errc e) noexcept;

/// The status of a failed work completion: the values of `ibv_wc_status`.
/// A data-path operation that fails on the wire completes with one of these;
/// every one compares equal to errc::provider.
enum class wc_errc : int {
  loc_len_err = 1,
  loc_qp_op_err = 2,
  loc_eec_op_err = 3,
  loc_prot_err = 4,
  wr_flush_err = 5,  ///< the QP went to error (disconnect, peer death) before it ran
  mw_bind_err = 6,
  bad_resp_err = 7,
  loc_access_err = 8,
  rem_inv_req_err = 9,
  rem_access_err = 10,  ///< the peer refused: rkey, bounds or access flags
  rem_op_err = 11,
  retry_exc_err = 12,
  rnr_retry_exc_err = 13,  ///< no receive was posted at the peer in time
  loc_rdd_viol_err = 14,
  rem_inv_rd_req_err = 15,
  rem_abort_err = 16,
  inv_eecn_err = 17,
  inv_eec_state_err = 18,
  fatal_err = 19,
  resp_timeout_err = 20,
  general_err = 21,
  tm_err = 22,
  tm_rndv_incomplete = 23,
};

/// The category of wc_errc codes ("arpma.wc"; messages as ibv_wc_status_str).
[[nodiscard]] const std::error_category& completion_category() noexcept;
[[nodiscard]] std::error_code make_error_code(wc_errc e) noexcept;

/// The RPMA_E_* value (or 0) that the C API returns for `ec`: arpma's own codes
/// keep their value, ECANCELED maps to RPMA_E_UNKNOWN, any other provider code
/// (errno, work-completion status) maps to RPMA_E_PROVIDER.
[[nodiscard]] int to_rpma_error(const std::error_code& ec) noexcept;

}  // namespace arpma

template <>
struct std::is_error_condition_enum<arpma::errc> : std::true_type {};
template <>
struct std::is_error_code_enum<arpma::wc_errc> : std::true_type {};
