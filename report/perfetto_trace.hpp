// trace.json: the profiled iteration in the Chrome trace event format that ui.perfetto.dev and
// chrome://tracing open. Ops are complete slices (ph X) per thread, tensor lifetimes async slices
// (ph b/e: they overlap, so they cannot nest), resident bytes per tier counter tracks (ph C), and
// migrations slices on tracks of their own. Times are microseconds from the iteration's start.
#pragma once

#include <cstdint>
#include <string>

#include "report/summary.hpp"

namespace tierpack::report {

/// Process ids of the trace's tracks (named by metadata events).
inline constexpr int kTracePidOps = 1;
inline constexpr int kTracePidMemory = 2;
inline constexpr int kTracePidMigrations = 3;
inline constexpr int kTracePidTensorsBase = 10;  ///< + device + 1 (host is device -1)

/// The trace as a string (tests, small profiles).
std::string render_trace(const ReportModel& model);
/// Streams the trace into `path` (atomically); returns its size. Throws os_error.
std::uint64_t write_trace(const ReportModel& model, const std::string& path);

}  // namespace tierpack::report
