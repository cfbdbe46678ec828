// HostRuntime: applies a Plan to host memory during a run. It owns the host allocator and mover,
// routes every new allocation to its planned (class, tier) arena by its position in the iteration's
// allocation sequence, and runs the plan's moves at op boundaries through the schedule executor
// (migrate/schedule_executor.hpp, driven by op events). The integration layer (torch CPU allocator,
// preload, LibTorch) calls it; it knows nothing of torch.
//
// Note [Routing allocations by sequence position]
// Allocation i of an iteration (counted from begin_iteration()) is the plan's placement with seq i,
// if the plan has one of the same size: it goes to its group's class arena on the group's home
// tier and is tagged with the group, so the group's moves carry it. Anything else (no plan yet,
// beyond the plan, a different size) goes to the default class on the fast tier. A size mismatch
// means this iteration diverged from the profiled one (dynamic shapes): the runtime stops using the
// plan for the rest of the iteration (no more routing, no more moves), counts it, and says why in
// IterationStats::divergence; after `phases.divergence_limit` in a row it turns the plan off for good
// (RunPhases: Note [Diverged iterations] in runtime/phases.hpp).
// A block that does not fit the fast tier's budget goes to the slow tier instead (counted as a
// fallback), so a budget is never exceeded by an allocation and a run never fails for it while
// another tier has room.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "alloc/host/host_arena_allocator.hpp"
#include "core/config.hpp"
#include "core/plan.hpp"
#include "migrate/host/foreign_pages.hpp"
#include "migrate/host/host_mover.hpp"
#include "migrate/schedule_executor.hpp"
#include "runtime/phases.hpp"

namespace tierpack::host {

struct HostRuntimeOptions {
  HostAllocatorOptions alloc;
  MoverOptions mover;
  TensorClass default_class = TensorClass::iteration;
  RunPhaseOptions phases;  ///< the divergence limit (Note [Diverged iterations])
};

/// What happened in one iteration (begin_iteration .. end_iteration).
struct IterationStats {
  std::int64_t iteration = -1;
  std::uint64_t allocations = 0;  ///< blocks allocated
  std::uint64_t planned = 0;      ///< routed by the plan
  std::uint64_t unplanned = 0;    ///< default class: no plan, or no placement for the seq
  std::uint64_t mismatched = 0;   ///< placement found but of another size (divergence)
  std::uint64_t fallbacks = 0;    ///< fast tier over budget: placed on the slow tier
  std::uint64_t fast_peak = 0;    ///< highest bytes resident on the fast tier (allocator charge)
  MoveCounters moves;
  std::string divergence;         ///< first reason the plan was not followed ("" when it was)
  bool had_plan = false;          ///< a plan was in force when the iteration began
  bool turned_off = false;        ///< the plan was turned off in this iteration (divergence says why)

  /// The plan was in force for the whole iteration: every allocation it placed was routed by it and
  /// every move it schedules was issued (what `tierpack run` counts as "applied").
  bool followed() const { return had_plan && divergence.empty(); }
};

class HostRuntime {
 public:
  /// `topo`: the machine's tiers (host tiers are used). Config gives the fast budget
  /// (config.fast_budget; a percentage needs a plan's natural peak to resolve).
  HostRuntime(const Config& config, const Topology& topo, HostRuntimeOptions options = {});
  ~HostRuntime();

  /// Installs a plan (from the profile just taken, or config.plan_in); one per runtime. Throws logic_error
  /// when the plan names tiers this machine lacks, moves a group between tiers no host mover serves
  /// (mover_for in migrate/mover.hpp: a GPU plan), or when a plan was installed already; the runtime then
  /// keeps running as it was.
  /// Live blocks of persistent placements (seq -1) are found by address, tagged with their group,
  /// and moved to the group's home tier if they are elsewhere.
  void set_plan(Plan plan);
  bool has_plan() const;
  /// Tensors from before the plan that another allocator owns (the run's profiling arena): their
  /// whole pages join their plan group, so the plan's moves carry them (Note [Foreign pages]). They
  /// are taken to be on the fast tier (where they were profiled) and charged there; each group
  /// whose home is another tier is sent there now (asynchronously: mover().wait_idle() waits).
  /// Tensors without a known group stay and stay charged; one that overlaps a tensor adopted
  /// already is skipped. Returns how many were adopted. Call after set_plan().
  std::size_t adopt(std::span<const ForeignTensor> tensors);
  /// A tensor given to adopt() (by its address) is freed: no later move touches it. False if unknown.
  bool forget(const void* p) noexcept;
  const ForeignPages& foreign() const noexcept { return *foreign_; }
  /// One line saying what the plan does here ("plan: 3 groups, 12 moves/iteration, fast budget 4 GiB").
  std::string plan_summary() const;

  /// A block for the next allocation of the iteration (see Note [Routing allocations by sequence
  /// position]). Throws out_of_memory only when no host tier has room.
  void* allocate(std::size_t bytes);
  void deallocate(void* p) noexcept;

  /// `first_seq`: allocations of this iteration that happened before the call (a boundary found
  /// by allocation periodicity is reported a few allocations late).
  void begin_iteration(std::int64_t first_seq = 0);
  void end_iteration();
  void on_op_begin(OpIndex op);
  void on_op_end(OpIndex op);

  /// What the schedule executor did in the iteration so far (ScheduleExecutor::take_log: each move it
  /// issued, with its times from the executor's clock zero, ExecutionLog::began); clears it. Empty when
  /// there is no plan. Take it after end_iteration() and before the next begin_iteration(), which
  /// restarts the clock.
  ExecutionLog take_execution_log();
  /// The same log so far, left in place (ScheduleExecutor::log_so_far), to watch moves end while the
  /// iteration runs.
  ExecutionLog execution_log_so_far();
  /// Stats of the last finished iteration, and of the current one so far.
  IterationStats last_iteration() const;
  IterationStats current_iteration() const;

  TierId fast_tier() const noexcept { return fast_; }
  std::optional<TierId> slow_tier() const noexcept { return slow_; }
  HostArenaAllocator& allocator() noexcept { return *alloc_; }
  HostMover& mover() noexcept { return *mover_; }

 private:
  /// Submits one move per (group, home) pair, duplicates dropped: towards the fast tier a prefetch.
  void send_home(std::vector<std::pair<GroupId, TierId>> to_move);
  struct ActivePlan {
    Plan plan;
    std::vector<TierId> group_home;  // plan group id -> runtime tier
    std::unordered_map<std::int64_t, std::size_t> by_seq;       // seq -> placement index
  };

  TierId map_tier(const Plan& plan, TierId plan_tier) const;
  /// The executor issues the moves due after op `after` (kBeforeIteration: a new iteration begins), while
  /// the plan is followed.
  void issue_moves(OpIndex after);
  void* allocate_on(std::size_t bytes, TensorClass cls, TierId tier, AllocationTag tag);
  void note_divergence(const std::string& why);

  Config config_;
  Topology topo_;
  HostRuntimeOptions options_;
  std::unique_ptr<HostArenaAllocator> alloc_;
  std::unique_ptr<ForeignPages> foreign_;  // before mover_: the mover uses it
  std::unique_ptr<HostMover> mover_;
  TierId fast_ = kNoTier;
  std::optional<TierId> slow_;

  std::mutex exec_mu_;                          // op events may come from several threads
  std::unique_ptr<ScheduleExecutor> executor_;  // the plan's schedule (set by set_plan); under exec_mu_

  mutable std::mutex mu_;
  std::shared_ptr<const ActivePlan> plan_;  // replaced whole by set_plan; read under mu_
  RunPhases phases_;                        // warm-up until set_plan; under mu_
  std::atomic<std::int64_t> seq_{0};
  std::int64_t iteration_ = -1;
  IterationStats current_;
  IterationStats last_;
};

}  // namespace tierpack::host
