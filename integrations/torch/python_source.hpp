// Where a Python program is when it allocates: the innermost frame of the calling thread outside
// torch's and tierpack's own Python files, read through CPython's C API resolved at run time (no link
// against libpython; a LibTorch program without Python finds nothing). Note [Python source] in
// python_source.cpp says how, and why it may take the GIL.
#pragma once

#include <cstdint>

#include "profiler/event_recorder.hpp"

namespace tierpack::python_source {

/// Resolves the CPython functions in this process (once; later calls do nothing). Returns false, and
/// current() then always returns an empty SourceRef, when there is no Python or it is too old (< 3.9),
/// or when not `enabled` (TIERPACK_CONF python_source:off). Call from install(), before any allocation asks.
bool init(bool enabled) noexcept;
/// Whether init() found a Python to read.
bool available() noexcept;
/// The calling thread's innermost frame outside torch and tierpack ("/home/me/model.py", 63,
/// "forward"); empty when the thread runs no Python. The views stay valid until the process exits.
/// Call with no tierpack lock held: it may wait for the GIL.
SourceRef current() noexcept;

/// Counters of current() on threads that run Python (for `tierpack profile --verbose`).
struct Stats {
  std::uint64_t walks = 0;     ///< stacks walked
  std::uint64_t gil_held = 0;  ///< of which the thread already held the GIL
  std::uint64_t found = 0;     ///< of which a frame outside torch and tierpack was found
};
Stats stats() noexcept;

}  // namespace tierpack::python_source
