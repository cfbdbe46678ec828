// HostRuntime: plan routing, budget fallback, op-driven moves, per-iteration stats.
// See Note [Routing allocations by sequence position] in host_runtime.hpp.
#include "runtime/host/host_runtime.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/units.hpp"

namespace tierpack::host {

HostRuntime::HostRuntime(const Config& config, const Topology& topo, HostRuntimeOptions options)
    : config_(config), topo_(topo), options_(options), phases_(options_.phases) {
  alloc_ = std::make_unique<HostArenaAllocator>(topo_, options_.alloc);
  foreign_ = std::make_unique<ForeignPages>(*alloc_);
  mover_ = std::make_unique<HostMover>(*alloc_, options_.mover, foreign_.get());
  // Fast: the host DRAM tier with the most capacity (first if none is known); slow: the first
  // far-memory tier, else the next host tier.
  const auto& tiers = alloc_->tiers();
  fast_ = tiers.front();
  std::uint64_t best = 0;
  for (TierId t : tiers) {
    const Tier& info = alloc_->tier_info(t);
    if (info.kind == TierKind::host_dram && info.capacity_bytes > best) {
      best = info.capacity_bytes;
      fast_ = t;
    }
  }
  for (TierId t : tiers) {
    if (t != fast_ && alloc_->tier_info(t).kind == TierKind::far_memory) {
      slow_ = t;
      break;
    }
  }
  if (!slow_) {
    for (TierId t : tiers) {
      if (t != fast_) {
        slow_ = t;
        break;
      }
    }
  }
  if (config_.fast_budget.bytes) alloc_->set_budget(fast_, *config_.fast_budget.bytes);
}

HostRuntime::~HostRuntime() {
  executor_.reset();
  mover_.reset();  // stop moving before the allocator's arenas go away
  foreign_.reset();
  alloc_.reset();
}

TierId HostRuntime::map_tier(const Plan& plan, TierId plan_tier) const {
  if (plan.topology.tiers.empty()) {
    if (!alloc_->serves(plan_tier)) throw logic_error("plan tier " + std::to_string(plan_tier) + " is not a host tier here");
    return plan_tier;
  }
  const Tier& want = plan.topology.at(plan_tier);
  for (TierId t : alloc_->tiers()) {
    if (alloc_->tier_info(t).name == want.name) return t;
  }
  for (TierId t : alloc_->tiers()) {
    if (alloc_->tier_info(t).numa_node == want.numa_node) return t;
  }
  throw logic_error("plan tier " + want.name + " (NUMA node " + std::to_string(want.numa_node) +
                    ") has no host tier on this machine");
}

void HostRuntime::set_plan(Plan plan) {
  {
    std::lock_guard lock(mu_);
    if (phases_.phase() != RunPhase::warmup)
      throw logic_error(std::string("host runtime: a plan was installed already (phase ") + to_string(phases_.phase()) +
                        ")");
  }
  auto ap = std::make_shared<ActivePlan>();
  GroupId max_group = 0;
  for (const PageGroup& g : plan.groups) max_group = std::max(max_group, g.id);
  ap->group_home.assign(plan.groups.empty() ? 0 : max_group + 1, kNoTier);
  for (const PageGroup& g : plan.groups) ap->group_home[g.id] = map_tier(plan, g.home);
  for (std::size_t i = 0; i < plan.placements.size(); ++i) {
    const TensorPlacement& p = plan.placements[i];
    if (p.group >= ap->group_home.size() || ap->group_home[p.group] == kNoTier) {
      throw logic_error("plan placement of tensor " + std::to_string(p.tensor) + " names unknown group " +
                        std::to_string(p.group));
    }
    if (p.seq >= 0) ap->by_seq.emplace(p.seq, i);
  }
  for (Move& m : plan.schedule) {
    if (m.group >= ap->group_home.size() || ap->group_home[m.group] == kNoTier) {
      throw logic_error("plan move names unknown group " + std::to_string(m.group));
    }
    if (!plan.topology.tiers.empty()) {
      const MoverKind by = mover_for(plan.topology.at(m.from).kind, plan.topology.at(m.to).kind);
      if (by != MoverKind::host_pages)
        throw logic_error("plan moves group " + std::to_string(m.group) + " from tier " +
                          plan.topology.at(m.from).name + " to tier " + plan.topology.at(m.to).name + ": that is the " +
                          std::string(to_string(by)) + "'s pair, not the host mover's");
    }
    m.from = map_tier(plan, m.from);
    m.to = map_tier(plan, m.to);
  }
  std::uint64_t budget = plan.fast_budget_bytes;
  if (budget == 0 && config_.fast_budget.is_set()) {
    budget = config_.fast_budget.resolve(plan.prediction.natural_peak_bytes);
  }
  if (plan.fast_tier != kNoTier) fast_ = map_tier(plan, plan.fast_tier);
  if (plan.slow_tier != kNoTier) slow_ = map_tier(plan, plan.slow_tier);
  ap->plan = std::move(plan);
  if (budget != 0) alloc_->set_budget(fast_, budget);

  // Blocks that outlive iterations (parameters, optimizer state) were allocated before the plan:
  // find them by their profiled address and bring each group home.
  std::vector<std::pair<GroupId, TierId>> to_move;
  for (const TensorPlacement& p : ap->plan.placements) {
    if (p.seq >= 0 || p.address == 0) continue;
    auto info = alloc_->lookup(reinterpret_cast<void*>(p.address));
    if (!info || reinterpret_cast<std::uintptr_t>(info->base) != p.address || info->bytes != p.bytes) continue;
    alloc_->retag(info->base, AllocationTag{info->seq, p.group});
    if (info->tier != ap->group_home[p.group]) to_move.emplace_back(p.group, ap->group_home[p.group]);
  }
  {
    std::lock_guard lock(exec_mu_);
    executor_ = std::make_unique<ScheduleExecutor>(*mover_, ap->plan.schedule);
  }
  {
    std::lock_guard lock(mu_);
    plan_ = std::move(ap);
    phases_.follow();
  }
  send_home(std::move(to_move));
}

void HostRuntime::send_home(std::vector<std::pair<GroupId, TierId>> to_move) {
  std::sort(to_move.begin(), to_move.end());
  to_move.erase(std::unique(to_move.begin(), to_move.end()), to_move.end());
  for (const auto& [g, home] : to_move) {
    Move m;
    m.group = g;
    m.to = home;
    m.kind = home == fast_ ? MoveKind::prefetch : MoveKind::evict;
    mover_->submit(m);
  }
}

std::size_t HostRuntime::adopt(std::span<const ForeignTensor> tensors) {
  std::size_t adopted = 0;
  std::shared_ptr<const ActivePlan> ap;
  {
    std::lock_guard lock(mu_);
    ap = plan_;
  }
  std::vector<std::pair<GroupId, TierId>> to_move;
  for (const ForeignTensor& t : tensors) {
    const bool known = ap && t.group < ap->group_home.size() && ap->group_home[t.group] != kNoTier;
    try {
      foreign_->add(t.address, t.bytes, known ? t.group : kNoGroup, fast_);
    } catch (const logic_error&) {
      continue;  // overlaps one adopted already (the profile saw the address twice): not carried
    }
    ++adopted;
    if (known && ap->group_home[t.group] != fast_) to_move.emplace_back(t.group, ap->group_home[t.group]);
  }
  send_home(std::move(to_move));
  return adopted;
}

bool HostRuntime::forget(const void* p) noexcept { return foreign_->remove(reinterpret_cast<std::uintptr_t>(p)); }

bool HostRuntime::has_plan() const {
  std::lock_guard lock(mu_);
  return plan_ != nullptr;
}

std::string HostRuntime::plan_summary() const {
  std::lock_guard lock(mu_);
  const auto& tiers = alloc_->tiers();
  std::string where = "fast tier " + alloc_->tier_info(fast_).name +
                      (slow_ ? ", slow tier " + alloc_->tier_info(*slow_).name : std::string(", no slow tier"));
  const std::uint64_t budget = alloc_->usage(fast_).budget;
  where += budget ? ", fast budget " + format_bytes(budget) : ", no fast budget";
  if (!plan_) return "host: no plan (" + std::to_string(tiers.size()) + " host tier(s); " + where + ")";
  const Plan& p = plan_->plan;
  if (p.empty()) return "host plan: " + std::to_string(p.groups.size()) + " groups, nothing to move; " + where;
  return "host plan: " + std::to_string(p.groups.size()) + " groups, " + std::to_string(p.schedule.size()) +
         " moves per iteration; " + where;
}

void* HostRuntime::allocate_on(std::size_t bytes, TensorClass cls, TierId tier, AllocationTag tag) {
  try {
    return alloc_->allocate(bytes, cls, tier, tag);
  } catch (const out_of_memory&) {
    if (tier != fast_ || !slow_) throw;
  }
  void* p = alloc_->allocate(bytes, cls, *slow_, tag);
  std::lock_guard lock(mu_);
  ++current_.fallbacks;
  return p;
}

void HostRuntime::note_divergence(const std::string& why) {
  // mu_ held
  if (!phases_.following()) return;
  if (current_.divergence.empty()) current_.divergence = why;
  if (!phases_.diverge()) return;
  plan_.reset();
  current_.turned_off = true;
  current_.divergence +=
      "; plan turned off after " + std::to_string(phases_.divergent_streak()) + " divergent iterations";
}

void* HostRuntime::allocate(std::size_t bytes) {
  const std::int64_t seq = seq_.fetch_add(1, std::memory_order_relaxed);
  TensorClass cls = options_.default_class;
  TierId tier = fast_;
  AllocationTag tag{seq, kNoGroup};
  {
    std::lock_guard lock(mu_);
    ++current_.allocations;
    if (phases_.following()) {
      auto it = plan_->by_seq.find(seq);
      if (it == plan_->by_seq.end()) {
        ++current_.unplanned;
      } else {
        const TensorPlacement& p = plan_->plan.placements[it->second];
        if (p.bytes != bytes) {
          ++current_.mismatched;
          note_divergence("allocation " + std::to_string(seq) + " is " + std::to_string(bytes) +
                          " bytes, the plan expected " + std::to_string(p.bytes));
        } else {
          ++current_.planned;
          cls = p.cls;
          tier = plan_->group_home[p.group];
          tag.group = p.group;
        }
      }
    } else {
      ++current_.unplanned;
    }
  }
  return allocate_on(bytes, cls, tier, tag);
}

void HostRuntime::deallocate(void* p) noexcept { alloc_->deallocate(p); }

void HostRuntime::issue_moves(OpIndex after) {
  {
    std::lock_guard lock(mu_);
    if (!phases_.following()) return;
  }
  std::lock_guard lock(exec_mu_);
  if (after == kBeforeIteration) executor_->begin_op_iteration();
  else executor_->op_end(after);
}

void HostRuntime::begin_iteration(std::int64_t first_seq) {
  {
    std::lock_guard lock(mu_);
    ++iteration_;
    current_ = IterationStats{};
    current_.iteration = iteration_;
    current_.had_plan = plan_ != nullptr;
  }
  seq_.store(first_seq, std::memory_order_relaxed);
  alloc_->reset_peak(fast_);
  issue_moves(kBeforeIteration);
}

void HostRuntime::end_iteration() {
  MoveCounters moves = mover_->take_counters();
  std::lock_guard lock(mu_);
  current_.moves = moves;
  current_.fast_peak = alloc_->usage(fast_).peak;
  phases_.end_iteration();  // a suspended plan is followed again (Note [Diverged iterations])
  last_ = current_;
}

// Late prefetches are counted whether the plan is followed now or not (moves may still be in flight).
void HostRuntime::on_op_begin(OpIndex op) {
  std::lock_guard lock(exec_mu_);
  if (executor_) executor_->op_begin(op);
}
void HostRuntime::on_op_end(OpIndex op) { issue_moves(op); }

ExecutionLog HostRuntime::take_execution_log() {
  std::lock_guard lock(exec_mu_);
  return executor_ ? executor_->take_log() : ExecutionLog{};
}

ExecutionLog HostRuntime::execution_log_so_far() {
  std::lock_guard lock(exec_mu_);
  return executor_ ? executor_->log_so_far() : ExecutionLog{};
}

IterationStats HostRuntime::last_iteration() const {
  std::lock_guard lock(mu_);
  return last_;
}

IterationStats HostRuntime::current_iteration() const {
  std::lock_guard lock(mu_);
  IterationStats s = current_;
  s.moves = mover_->counters();
  return s;
}

}  // namespace tierpack::host
