// Internal: the static text of arpma's error values, shared by
// error_category().message() and the C API's rpma_err_2str(); and the error a
// completion handler receives.
#pragma once

#include "arpma/error.hpp"

#include <system_error>

namespace arpma::detail {

/// The completion-signature form of `ec`: errno codes become Boost's own
/// system/generic codes, so `ec == asio::error::operation_aborted` holds for a
/// cancellation as with every Asio operation; converting back to
/// std::error_code gives the same errno. Other codes are wrapped unchanged.
[[nodiscard]] error_code to_completion_error(const std::error_code& ec) noexcept;

/// A static string for 0 ("Success"), each RPMA_E_* value, and "Unknown error"
/// for any other value. Never fails, never allocates.
[[nodiscard]] const char* describe(int value) noexcept;

}  // namespace arpma::detail
