// Checkers for trace.json (the trace event format's rules) and memory_snapshot.json (PyTorch
// snapshot schema, self-consistency), shared by the report tests. Each returns the problems found;
// an empty list means the document passes.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tierpack::report::testing {

/// Known phases; ts/dur numeric, >= 0 and within [0, end_us] (so microseconds, not nanoseconds); X
/// slices nest per (pid, tid); every async begin has one end, not earlier, with the same (pid, cat,
/// id); counter args numeric; processes and threads named by metadata before use.
std::vector<std::string> validate_trace(const nlohmann::json& trace, double end_us);

/// Segments tiled by their blocks with consistent sizes; every device trace replays cleanly (no
/// address allocated twice at once, every free_requested after a matching alloc, every
/// free_completed after its free_requested, allocations inside a segment, time never backwards) and
/// ends in the segments' active blocks.
std::vector<std::string> check_snapshot(const nlohmann::json& snapshot);

}  // namespace tierpack::report::testing
