// Fault injection (CMake option ARPMA_FAULT_INJECTION, docs/reliability.md): with
// ARPMA_FAULT_INJECTION=N in the environment, the N-th fault point the process reaches fails;
// with ARPMA_FAULT_COUNT_FILE=PATH, the number of points reached (and their names) is written
// to PATH at exit. Built without the option, ARPMA_FAULT_POINT is the constant false.
#pragma once

#ifdef ARPMA_FAULT_INJECTION

namespace arpma::fault {

/// True when either variable is set: the providers are wrapped and points are counted.
[[nodiscard]] bool enabled() noexcept;

/// Counts one point; true when it is the one to fail (then says so on stderr). `where` must
/// be a string literal: its address is kept.
[[nodiscard]] bool fail_here(const char* where) noexcept;

/// Provider objects, counted while alive: what is still alive at exit goes into the count
/// file ("live id 1"). LeakSanitizer cannot see these leaks: a provider keeps its objects
/// reachable (the soft provider in its tables, verbs in the kernel).
enum class object { event_channel, id, qp, pd, comp_channel, cq, mr, srq, kinds };

/// `delta` (+1 created, -1 destroyed) to the count of live `kind` objects.
void note_object(object kind, int delta) noexcept;

}  // namespace arpma::fault

#define ARPMA_FAULT_POINT(where) (::arpma::fault::fail_here(where))

#else

#define ARPMA_FAULT_POINT(where) (false)

#endif
