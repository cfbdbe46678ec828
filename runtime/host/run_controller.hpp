// RunController: what `tierpack run` does inside the training process. It plugs into the Session
// (Note [Session fan-out]) as the CPU tensors' memory source and as an event listener, and walks the
// run through its phases:
//   1. warm-up and profiled iterations: CPU tensors come from the profiling arena (page-trackable),
//      the recorder builds the profile;
//   2. at the end of the last profiled iteration, on the training thread: snapshot -> Profile ->
//      placer plan under the fast budget -> a HostRuntime (host_runtime.hpp) with that plan; new CPU
//      tensors come from it from the next iteration on, op events drive its moves;
//   3. at exit: per-iteration status lines, the run statistics file (core/run_stats.hpp format,
//      plus a "tierpack_run" section) and, with a profile path, the plan next to it.
// With a plan given (config.plan_in) phase 1 is skipped: the runtime serves every tensor from the start.
//
// Note [Tensors from before the plan]
// Tensors allocated while profiling (parameters, gradients, optimizer state: everything that lives
// across iterations) stay in the profiling arena: their pointers cannot change. At install the
// controller hands the runtime each of them that the plan places (a persistent placement whose
// profiled address and size name a block of the arena) with its plan group (HostRuntime::adopt):
// their whole pages join the group, so every move of the group, the install-time move to its home
// and the plan's per-iteration evictions and prefetches alike, moves them with move_pages on the
// mover's worker, with the runtime's per-page outcomes and counters (Note [Moves carry foreign
// pages] in migrate/host/host_mover.hpp). A page shared with another tensor stays where it is.
// Accounting: their bytes are resident bytes of the runtime's allocator on the tier they are on
// (Note [Foreign pages] in migrate/host/foreign_pages.hpp): whole pages on the tier their last
// complete move took them to, the shared rest on the fast tier for good. So the fast tier's budget
// is the plan's budget, unchanged: an allocation or a prefetch that would pass it with those bytes
// counted goes to the slow tier or waits, exactly as for the runtime's own blocks, and the fast peak
// in the status lines and stats file includes them. The install waits for the moves it issued, so
// the first planned iteration starts with the tensors at home. Frees of those tensors go back to the
// arena (RunMemory routes frees by owns()) after the runtime forgets them (HostRuntime::forget), so
// no later move touches a freed block, even when its address is handed out again.
//
// Note [Late boundaries]
// Optimizer-step and explicit marks arrive exactly at the boundary. A boundary found by periodicity
// of the allocation sequence (LibTorch programs without tierpack::step()) falls on an allocation,
// and the session reports it at the next op end, a few allocations into the new iteration. Those
// allocations were served as the previous iteration's tail (beyond the plan: default class); the
// runtime's sequence then starts at their count, so the rest of the iteration lines up with the plan.
// Where the boundary was: the profile's iteration lengths up to the profiled one, then one period
// per iteration; RunMemory counts the same allocations the recorder does.
//
// Note [Tiers this machine lacks]
// The plan's tier model may name a host tier whose NUMA node this machine does not have (a preset
// such as ddr5-cxl on a one-node machine). Such a tier is emulated on node 0: its arenas, budget and
// moves are real (move_pages to the node the pages are already on), so routing and accounting are
// exercised, but nothing is slower; the run says so in its status line. A one-node machine without
// --tiers plans on its one tier: nothing to move.
//
// Note [What the run summary says]
// An iteration is under the plan once the plan is installed (apply_from on); it *followed* the plan when
// the runtime had the plan at its start and never left it (HostRuntime IterationStats::followed(): every
// allocation the plan places routed by it, every move issued). An iteration whose allocations stop
// matching the plan (dynamic shapes, another program's plan) leaves it for its rest; after
// `divergence_limit` such iterations in a row (Note [Diverged iterations] in runtime/phases.hpp) the
// runtime turns the plan off for good. The statistics file says so per iteration (`plan_followed`,
// `plan_turned_off`) and for the run (`iterations_under_plan`, `iterations_followed`, `plan_turned_off_at`,
// `plan_turned_off_why`), and the final line of `tierpack run` reads them: "plan applied from iteration A
// for N of M iteration(s)", and "turned off at iteration K: <why>" when it was; a plan followed in none of
// its iterations is an error.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/plan.hpp"
#include "core/run_stats.hpp"
#include "runtime/host/host_runtime.hpp"
#include "runtime/session/profiling_arena.hpp"
#include "runtime/session/session.hpp"

namespace tierpack {

/// CPU tensor memory of a run: the profiling arena until a runtime is installed, then the runtime.
/// Frees go to whichever owns the block.
class RunMemory final : public HostMemory {
 public:
  explicit RunMemory(std::unique_ptr<ProfilingArena> arena) : arena_(std::move(arena)) {}

  std::string_view name() const override;
  void* allocate(std::size_t bytes) noexcept override;
  void deallocate(void* p) noexcept override;
  bool owns(const void* p) const noexcept override;
  bool page_trackable() const noexcept override { return arena_ && !runtime_.load(std::memory_order_acquire); }
  std::optional<std::pair<std::uintptr_t, std::uintptr_t>> extent_of(std::uintptr_t p) const noexcept override {
    return arena_ ? arena_->extent_of(p) : std::nullopt;
  }

  /// From now on new blocks come from `runtime` (which must outlive this object). The runtime it
  /// replaces (if any) still takes back the blocks it handed out.
  void install(host::HostRuntime* runtime) noexcept {
    previous_.store(runtime_.exchange(runtime, std::memory_order_acq_rel), std::memory_order_release);
  }
  /// `runtime` carries arena blocks (Note [Tensors from before the plan]): it forgets each before
  /// the arena takes it back. Set before HostRuntime::adopt.
  void set_adopter(host::HostRuntime* runtime) noexcept { adopter_.store(runtime, std::memory_order_release); }
  ProfilingArena* arena() noexcept { return arena_.get(); }
  /// The lowest address the arena handed out (0: none), for residency queries.
  std::uintptr_t arena_low() const noexcept { return arena_low_.load(std::memory_order_relaxed); }
  /// Blocks handed out so far (what the recorder counts as allocations: Note [Late boundaries]).
  std::uint64_t allocations() const noexcept { return allocations_.load(std::memory_order_relaxed); }

 private:
  std::unique_ptr<ProfilingArena> arena_;
  std::atomic<host::HostRuntime*> runtime_{nullptr};
  std::atomic<host::HostRuntime*> previous_{nullptr};  ///< the runtime before the plan's (no arena)
  std::atomic<host::HostRuntime*> adopter_{nullptr};   ///< the runtime that carries arena blocks
  std::atomic<std::uintptr_t> arena_low_{0};
  std::atomic<std::uint64_t> allocations_{0};
};

/// Where the pages of the tensors from before the plan of a group were when a move of the group was
/// seen over (move_pages status), in the first planned iteration: Note [Tensors from before the plan].
struct ArenaMoveCheck {
  std::int32_t iteration = 0;
  GroupId group = 0;
  MoveKind kind = MoveKind::evict;
  int node = -1;                    ///< the target tier's node
  std::uint64_t pages_on_node = 0;  ///< whole pages of the group's arena tensors there
  std::uint64_t pages_elsewhere = 0;  ///< on another node
  std::uint64_t pages_absent = 0;   ///< not present (never touched, zero page)
};

/// Per iteration of the run (one line at exit, one entry of the stats file).
struct RunIterationRecord {
  std::int32_t index = 0;
  std::uint64_t step_ns = 0;
  bool planned = false;  ///< the plan was in force
  host::IterationStats stats;
};

class RunController final : public EventListener {
 public:
  /// Creates the memory source and the listener for a Session in run mode and plugs both in (call
  /// before session.start()). With config.plan_in the plan is read and installed now (throws
  /// tierpack::error when it cannot be used). The controller lives as long as the session.
  static std::shared_ptr<RunController> attach(Session& session, const Config& config);

  RunController(Session& session, Config config, RunMemory* memory);

  void on_op_begin(std::string_view name, Phase phase) noexcept override;
  void on_op_end(std::string_view name) noexcept override;
  void on_iteration(std::int32_t ended, IterationSource source) noexcept override;
  /// Allocations of the new iteration made before its boundary was reported (Note [Late boundaries]).
  std::int64_t late_allocations(IterationSource source, const Profile* profile, std::int32_t ended);
  void on_finish() noexcept override;
  bool wants_ops() const noexcept override { return follow_ops_.load(std::memory_order_relaxed); }

  /// Makes the plan of the profile just recorded and installs it (phase 2). False when it could not
  /// (the reason is logged and kept for the stats file); training goes on without a plan.
  bool plan_from_profile(std::int32_t ended, IterationSource source);
  /// Installs `plan`: the runtime, its budget, the arena's tensors (Note [Tensors from before the plan]).
  void install_plan(Plan plan, std::int64_t first_seq = 0);

  const std::string& plan_error() const { return plan_error_; }

 private:
  Topology runtime_topology(const Plan& plan);
  void settle_arena_tensors(const Plan& plan);
  /// Records where the group's arena tensors are now that `m`, its latest move so far in `iteration`, is
  /// over (mu_ held).
  void check_arena_move(std::int32_t iteration, const Move& m);
  /// check_arena_move for each move of the executor's log of the iteration seen over for the first time
  /// while still its group's latest (mu_ held).
  void check_arena_moves(const ExecutionLog& log);
  /// The moves the runtime issued in iteration `ended` (`step_ns` long), from the executor's log, on
  /// iter_start_'s clock; checks the arena tensors' moves in the first planned iteration (mu_ held).
  std::vector<MeasuredMove> take_moves(std::int32_t ended, std::uint64_t step_ns);
  void sample(std::uint64_t t_ns);
  void write_stats() noexcept;
  /// Pages by NUMA node (move_pages status) of the runtime's live blocks and of the profiling arena's
  /// extent; false when there is no arena extent to count. Needs runtime_.
  bool residency_at_exit(std::map<int, std::uint64_t>& runtime_nodes, std::map<int, std::uint64_t>& arena_nodes);
  std::string plan_path() const;

  Session& session_;
  Config config_;
  RunMemory* memory_;
  std::unique_ptr<host::HostRuntime> runtime_;  // never destroyed before the process ends
  Plan plan_;
  std::uint64_t arena_fast_bytes_ = 0;          // tensors from before the plan on the fast tier after install
  std::uint64_t arena_moved_bytes_ = 0;         // ... on the slow tier after install
  std::vector<std::string> emulated_;           // tiers emulated on node 0 (Note [Tiers this machine lacks])
  std::string plan_error_;
  std::atomic<bool> applying_{false};           // the runtime follows a plan now
  std::atomic<bool> follow_ops_{false};         // the plan has moves: op events drive them
  std::atomic<std::int32_t> next_op_{0};
  std::int32_t apply_from_ = -1;                // first iteration the plan was in force
  std::uint64_t next_boundary_ = 0;             // periodicity: allocation count where the next iteration starts
  std::uint64_t period_ = 0;                    // periodicity: allocations per iteration (0: marks)

  std::mutex mu_;  // guards everything below (op events may come from several threads)
  std::chrono::steady_clock::time_point iter_start_;
  std::vector<RunIterationRecord> iterations_;
  std::vector<OccupancySample> occ_now_, occ_last_;
  std::vector<MeasuredMove> moves_last_;
  std::int32_t sampled_ = -1;
  std::int32_t iteration_now_ = 0;            // the iteration under way
  std::vector<ArenaMoveCheck> arena_checks_;  // first planned iteration only
  std::vector<bool> seen_over_;               // ... its log's moves seen over (check_arena_moves)
  std::atomic<bool> finished_{false};
};

}  // namespace tierpack
