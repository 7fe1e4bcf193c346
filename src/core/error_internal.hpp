// Internal: the static text of arpma's error values, shared by
// error_category().message() and the C API's rpma_err_2str().
#pragma once

namespace arpma::detail {

/// A static string for 0 ("Success"), each RPMA_E_* value, and "Unknown error"
/// for any other value. Never fails, never allocates.
[[nodiscard]] const char* describe(int value) noexcept;

}  // namespace arpma::detail
