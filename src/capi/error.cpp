// rpma_err_2str: the text of arpma's error values (src/rpma_err.c in librpma).
#include <librpma.h>

#include "core/error_internal.hpp"

extern "C" const char* rpma_err_2str(int ret) { return arpma::detail::describe(ret); }
