// GpuRuntime: the GPU tier for one device as a PyTorch run sees it through the pluggable allocator.
// It owns the allocator, the mover and, once a plan exists, the schedule executor, and runs the
// phases of a run (RunPhases, runtime/phases.hpp), named in its statistics:
//
//   warm-up   (iterations 1..warmup): a stream-ordered caching allocator under the budget (chunks
//             over the budget spill to host memory, still mapped, so still correct);
//   observed  (recording, the next iteration): also records every allocation, free and op access on
//             the allocator's event clock (Note [Trace clock] in placer/vmm_plan.hpp);
//   reference (recording, the one after): records allocations and frees only, without the op
//             observer, whose presence can change the allocation sequence (Note [Observed and
//             reference iterations] in migrate/gpu/trace_align.hpp); the observed uses are carried over;
//   planned   (from then on): plans from the trace (or uses the plan it was given), puts each planned
//             allocation into its page group's arena by its sequence position, and runs the
//             schedule on the event clock;
//   suspended when an iteration's allocation sequence stops matching the traced one: for the rest
//             of that iteration migrations stop, every group is brought back where the budget
//             allows, and allocation goes on under the budget; the executor keeps its schedule (and
//             its repairs) and starts again at the next iteration's clock 0, which runs the plan
//             again (Note [Diverged iterations] in runtime/phases.hpp);
//   fallback  (off) after `phases.divergence_limit` diverged iterations in a row (dynamic shapes) or
//             a failed plan: the same for good, said once.
//
// Iteration boundaries come from the integration (the optimizer-step hook or an explicit
// tierpack.step()); op accesses from its op observer, needed in the traced iteration only.
#pragma once

#include <cstdint>
#include <atomic>
#include <map>
#include <unordered_map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "alloc/gpu/gpu_allocator.hpp"
#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/run_stats.hpp"
#include "migrate/gpu/group_mover.hpp"
#include "migrate/schedule_executor.hpp"
#include "placer/vmm_plan.hpp"
#include "runtime/phases.hpp"
#include "runtime/gpu/gpu_runtime_options.hpp"

namespace tierpack::gpu {

class GpuRuntime {
 public:
  GpuRuntime(std::unique_ptr<VmmBackend> backend, Config settings, int device = 0);
  ~GpuRuntime();
  GpuRuntime(const GpuRuntime&) = delete;
  GpuRuntime& operator=(const GpuRuntime&) = delete;

  /// Throws out_of_memory (the message names request, tier, budget and residency).
  void* allocate(std::size_t bytes, StreamHandle stream);
  void deallocate(void* p) noexcept;
  void record_stream(void* p, StreamHandle stream);
  /// A stream that may touch this device's memory without allocating on it: held at remap gates.
  void add_stream(StreamHandle stream);
  void empty_cache();

  // Op observer (only the traced iteration needs it).
  void op_begin(const char* name = "");
  void op_tensor(const void* p);
  void op_end();

  /// An iteration ended. Returns true when the next iteration is observed (ops should be reported).
  bool iteration();
  bool tracing() const;
  bool owns(const void* p) const;

  std::string stats_json() const;
  /// Where the statistics go when TIERPACK_CONF has stats_out=S: S without its extension +
  /// ".gpu<N>.json" (`tierpack run` reads them). "" without stats_out.
  static std::string stats_path(const std::string& stats_out, int device);
  /// Where the run statistics for the report go (Note [GPU run statistics]): <stats>.gpu<N>.run.json.
  static std::string run_stats_path(const std::string& stats_out, int device);
  AllocatorStats allocator_stats() const { return alloc_->stats(); }
  void reset_peaks() { alloc_->reset_peaks(); }
  GpuAllocator& allocator() { return *alloc_; }
  const Config& settings() const { return settings_; }
  /// One line for the log: device, budget, chunk, spill, migrate.
  std::string describe() const;

 private:
  struct Frame {
    std::int64_t from = 0;
    std::vector<std::uint32_t> tensors;
    std::int32_t op = -1;  // index into profile_ops_
  };
  // The observed iteration as a core Profile (Note [Runtime profile] in gpu_runtime.cpp).
  struct ProfiledTensor {
    std::int32_t birth_op = -1;  // kBeforeIteration
    std::int32_t death_op = 0x7fffffff;
    std::uint64_t birth_ns = 0, death_ns = 0;
    std::uint64_t stream = 0;
  };
  struct Planned {
    std::uint64_t bytes = 0;
    ArenaId arena = kDefaultArena;
  };
  struct TimelineSample {
    std::int64_t clock = 0;
    std::uint64_t t_ns = 0;          // from the iteration's start
    std::uint64_t device_bytes = 0;  // device handles held (the budget's measure)
    std::uint64_t segment_bytes[kResidenceCount] = {0, 0};  // chunks holding blocks, by residence
  };
  struct IterationRecord {
    int iteration = 0;
    RunPhase phase = RunPhase::warmup;
    const char* phase_name = "warm-up";  // as the statistics name it (phase_name_locked)
    std::int64_t events = 0;
    std::int64_t allocations = 0;
    MoverCounters moves;
    std::uint64_t peak_device_bytes = 0;
    std::uint64_t device_bytes_end = 0;
    std::uint64_t host_bytes_end = 0;
    std::uint64_t spilled_chunks = 0;   // in this iteration
    std::uint64_t pressure_waits = 0;   // in this iteration
    double pressure_wait_ns = 0;        // in this iteration
    std::uint64_t closed_arena_fallbacks = 0;  // in this iteration
    double seconds = 0;
    std::vector<TimelineSample> timeline;
    ExecutionLog log;  // planned iterations: the moves and stalls as they ran
  };

  void tick_locked(StreamHandle stream);  // advances the clock and the executor
  void start_trace_locked();
  void finish_trace_locked();
  void apply_plan_locked();
  void diverge_locked(const std::string& why);
  void write_profile_locked();
  std::string stats_json_locked(bool timelines) const;
  RunStats run_stats_locked() const;  // Note [GPU run statistics]
  Topology topology() const;          // gpu<N> (tier 0) and host (tier 1), as the profile and run statistics name them
  void write_stats_locked() const;  // Note [GPU statistics file]
  std::uint64_t since_start_ns() const;
  void log(const std::string& line) const;
  /// The phase as the statistics name it (warm-up, observed, reference, planned, suspended, fallback).
  const char* phase_name_locked() const;
  /// The observed iteration (the first recorded one) is under way: ops are reported.
  bool observing_locked() const;
  void note_rewrite(const RewriteReport& r);  // mover thread (Note [Rewrite reports])
  void repair_locked();                       // applies missed_ to the schedule between iterations

  Config settings_;  ///< TIERPACK_CONF (and its alias TIERPACK_GPU), parsed once (core/config.hpp)
  int device_ = 0;
  std::unique_ptr<VmmBackend> backend_;
  std::unique_ptr<GpuAllocator> alloc_;
  std::unique_ptr<GroupMover> mover_;
  std::unique_ptr<ScheduleExecutor> executor_;

  mutable std::mutex m_;
  RunPhases phases_;
  int iteration_ = 1;
  std::int64_t clock_ = 0;
  std::int64_t seq_ = 0;
  StreamHandle stream_ = 0;  // the compute stream: the stream of the latest allocation
  std::chrono::steady_clock::time_point iteration_start_;
  IterationTrace trace_;
  IterationTrace observed_;  // the observed iteration, kept while the reference one is traced
  std::map<std::uintptr_t, std::uint32_t> live_;  // traced tensors alive now, by address
  std::vector<Frame> frames_;
  std::vector<Planned> planned_;
  std::int64_t planned_allocations_ = 0;
  std::vector<ArenaId> group_arenas_;
  Plan plan_;
  bool have_plan_ = false;
  std::uint64_t gpu_budget_bytes_ = 0;
  std::string profile_id_;  ///< identity of the profile profile_out holds (Note [Profile identity])
  std::string divergence_;
  std::uint64_t divergences_ = 0;  // diverged iterations (Note [Diverged iterations])
  std::vector<IterationRecord> history_;
  AllocatorStats stats_at_start_;  // the allocator's counters when the current iteration began
  std::vector<TimelineSample> timeline_;
  std::int64_t timeline_stride_ = 1;
  std::vector<std::thread> prewarm_;
  std::vector<OpRecord> profile_ops_;
  std::vector<ProfiledTensor> profile_tensors_;  // parallel to trace_.tensors while observed

  // Note [Rewrite reports]: what a verified remap found, named by plan position. Own lock: the mover
  // thread must not take m_ (the training thread holds it while it waits for the mover).
  struct DiagTensor {
    std::uint64_t bytes = 0;
    std::vector<TracedUse> uses;
  };
  mutable std::mutex diag_m_;
  std::unordered_map<std::uintptr_t, std::int64_t> block_seq_;  // live planned blocks -> allocation position
  std::unordered_map<std::int64_t, DiagTensor> diag_seq_;        // plan's tensors by position
  std::unordered_map<std::uintptr_t, DiagTensor> diag_carried_;  // plan's carried tensors by address
  std::vector<std::string> rewrite_notes_;                       // not yet logged
  struct Missed {
    ArenaId arena = 0;
    Residence to = Residence::host;
    std::int64_t clock = 0;
    int iteration = 0;
  };
  std::vector<Missed> missed_;                                   // not yet repaired (Note [Repairing the schedule])
  std::unordered_map<ArenaId, GroupId> arena_group_;
  std::uint64_t rewrite_reports_ = 0;
  std::uint64_t repairs_ = 0;  // schedule repairs (m_)
  std::atomic<std::int64_t> clock_now_{0};
  std::atomic<int> iteration_now_{1};
};

}  // namespace tierpack::gpu
