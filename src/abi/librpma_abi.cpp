// The translation unit of the librpma.so.0 drop-in (src/CMakeLists.txt): the
// code is all libarpma.a's; this file pins what the ABI promises callers.
#include <librpma.h>

// The macros expand to these literals: comparing them is the point.
// NOLINTNEXTLINE(misc-redundant-expression)
static_assert(RPMA_E_UNKNOWN == -100000 && RPMA_E_NOT_SHARED_CHNL == -100009,
              "librpma's error values are part of its ABI");
static_assert(sizeof(struct rpma_conn_private_data) == 2 * sizeof(void*),
              "struct rpma_conn_private_data has librpma's layout");
static_assert(RPMA_CONN_UNREACHABLE == 4 && RPMA_FLUSH_TYPE_VISIBILITY == 1,
              "librpma's enum values are part of its ABI");
