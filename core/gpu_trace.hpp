// The GPU runtime's traced iteration (mechanism:vmm): every allocation and free on the allocator's event clock, and
// the ops that touched each tensor (Note [Trace clock] in placer/vmm_plan.hpp). A value: the runtime
// (runtime/gpu/gpu_runtime.cpp) records it, placer/vmm_plan.hpp plans from it, migrate/gpu/trace_align.hpp
// matches two of them.
#pragma once

#include <cstdint>
#include <vector>

namespace tierpack::gpu {

struct TracedUse {
  std::int64_t from = 0;
  std::int64_t to = 0;
};

struct TracedTensor {
  std::int64_t seq = -1;  ///< allocation position in the iteration; -1: alive when it began
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
  std::uint64_t segment = 0;  ///< allocator segment base (carried tensors move by segment)
  std::uint64_t segment_bytes = 0;
  std::int64_t birth = 0;   ///< clock at allocation (0 for carried tensors)
  std::int64_t death = -1;  ///< clock at free; -1: alive at the end
  std::vector<TracedUse> uses;
};

/// One allocator event of the iteration; event i moves the clock from i to i + 1.
struct TraceEvent {
  bool alloc = true;          ///< allocation (else free)
  std::uint32_t tensor = 0;   ///< index into IterationTrace::tensors
};

struct IterationTrace {
  std::int64_t clock_end = 0;  ///< clock value when the iteration ended
  std::vector<TracedTensor> tensors;
  std::vector<TraceEvent> events;  ///< in order (optional for planning; align_traces needs it)
};

}  // namespace tierpack::gpu
