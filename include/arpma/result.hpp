// arpma::result<T>: the return type of every synchronous C++ call.
#pragma once

#include <boost/outcome/std_result.hpp>

#include <system_error>

namespace arpma {

/// Either a value or the std::error_code that explains why there is none.
/// Inspect with `has_value()`, `value()`, `error()`; `value()` on an error
/// throws std::system_error.
template <class T>
using result = boost::outcome_v2::std_result<T>;

}  // namespace arpma
