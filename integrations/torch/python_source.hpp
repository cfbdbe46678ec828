// Where a Python program is when it allocates: the innermost frame of the calling thread outside
// torch's and tierpack's own Python files, read through CPython's C API resolved at run time (no link
// against libpython; a LibTorch program without Python finds nothing), and the nn.Module whose forward
// runs on the thread. Note [Python source] in python_source.cpp says how, and why it may take the GIL;
// Note [Module paths] there how the module is known.
#pragma once

#include <cstdint>
#include <string_view>

#include "profiler/event_recorder.hpp"

namespace tierpack::python_source {

/// Resolves the CPython functions in this process (once; later calls do nothing). Returns false, and
/// current() then always returns an empty SourceRef, when there is no Python or it is too old (< 3.9),
/// or when not `enabled` (TIERPACK_CONF python_source:off). Call from install(), before any allocation asks.
bool init(bool enabled) noexcept;
/// Whether init() found a Python to read.
bool available() noexcept;
/// The calling thread's innermost frame outside torch and tierpack ("/home/me/model.py", 63,
/// "forward") and the innermost module running on it (module_enter, "" none); empty when the thread
/// runs no Python. The views stay valid until the process exits. Call with no tierpack lock held: it
/// may wait for the GIL.
SourceRef current() noexcept;

// ---- module paths (Note [Module paths]): the Python package's module hooks call these ----
/// Module `id` (0, 1, ...: the Python side numbers the distinct paths) is named `path`; once per id,
/// before module_enter(id). False on a bad id or when sources are off.
bool name_module(std::int32_t id, std::string_view path) noexcept;
/// The forward of module `id` starts on the calling thread.
void module_enter(std::int32_t id) noexcept;
/// The forward of module `id` ended on the calling thread: pops the innermost entry of `id` and any
/// entries inside it (a forward that raised never said it ended). Nothing when `id` is not running.
void module_exit(std::int32_t id) noexcept;
/// The calling thread runs no module (an iteration boundary: entries a raising forward left are dropped).
void reset_modules() noexcept;

/// Counters of current() on threads that run Python (for `tierpack profile --verbose`).
struct Stats {
  std::uint64_t walks = 0;     ///< stacks walked
  std::uint64_t gil_held = 0;  ///< of which the thread already held the GIL
  std::uint64_t found = 0;     ///< of which a frame outside torch and tierpack was found
};
Stats stats() noexcept;

}  // namespace tierpack::python_source
