// Replaying a profile under a plan (see replay.hpp, docs/simulator.md).
#include "placer/replay.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "placer/copy_engine.hpp"
#include "placer/page_stats.hpp"
#include "placer/plan_check.hpp"
#include "placer/timeline.hpp"

namespace tierpack::placer {
namespace {

enum class Where : std::uint8_t { absent, fast, slow, to_fast, to_slow };

TierId tier_in_model(const TierModel& model, const Plan& plan, TierId plan_tier, const char* role) {
  if (plan_tier >= plan.topology.tiers.size()) return kNoTier;
  const std::string& name = plan.topology.at(plan_tier).name;
  if (const Tier* t = model.find(name)) return t->id;
  throw logic_error(std::string("the plan's ") + role + " tier '" + name + "' is not in the tier model");
}

class PlanReplay {
 public:
  PlanReplay(const Profile& profile, const Plan& plan, const TierModel& model, const ReplayOptions& opts,
             std::vector<GroupLife> lives)
      : profile_(profile), plan_(plan), opts_(opts), timeline_(profile), lives_(std::move(lives)) {
    TierChoice tiers;
    tiers.fast = tier_in_model(model, plan, plan.fast_tier, "fast");
    tiers.slow = tier_in_model(model, plan, plan.slow_tier, "slow");
    if (tiers.fast == kNoTier) throw logic_error("the plan has no fast tier");
    cost_ = make_cost_model(model, tiers, plan.device);
    TIERPACK_EXPECTS(lives_.size() == plan.groups.size(), "one life per group");
    group_of_.assign(profile.tensors.size(), kNoGroup);
    for (const auto& p : plan.placements)
      if (p.tensor < group_of_.size()) group_of_[p.tensor] = p.group;
  }

  ReplayResult run();

 private:
  static constexpr GroupId kNoGroup = 0xffffffffu;

  void use_fast(std::int64_t delta) {
    fast_used_ += delta;
    result_.fast_peak_bytes = std::max(result_.fast_peak_bytes, static_cast<std::uint64_t>(std::max<std::int64_t>(fast_used_, 0)));
  }
  bool room_for(std::uint64_t bytes) const { return fast_used_ + static_cast<std::int64_t>(bytes) <= budget_; }
  // Waits (advancing the copy engine) until `ready()` holds; returns false when nothing in flight can
  // make it hold, after forcing the blocked copy if `force` is set.
  template <class Ready>
  bool wait_until(CopyEngine& engine, Ready ready, bool force) {
    while (!ready()) {
      double t = engine.next_event();
      if (t == CopyEngine::kNever) {
        if (!force || !engine.force_next()) return false;
        ++result_.budget_overruns;
        t = engine.next_event();
        if (t == CopyEngine::kNever) return false;
      }
      engine.advance_to(t);
    }
    return true;
  }
  void issue(CopyEngine& engine, std::size_t mi);

  const Profile& profile_;
  const Plan& plan_;
  const ReplayOptions& opts_;
  Timeline timeline_;
  CostModel cost_;
  std::vector<GroupLife> lives_;
  std::vector<GroupId> group_of_;
  std::vector<Where> where_;
  std::vector<bool> dead_, submitted_, done_, counted_;
  std::vector<std::uint64_t> size_;  // bytes each group holds now
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::vector<std::size_t> pending_;   // per group: a move waiting for the group's running move
  std::vector<std::size_t> inflight_;  // per group: its running (or queued) move
  CopyEngine* engine_ = nullptr;
  std::int64_t fast_used_ = 0, budget_ = 0;
  double hold_pending_ = 0;  // remap holds not yet charged to the compute timeline
  ReplayResult result_;
};

void PlanReplay::issue(CopyEngine& engine, std::size_t mi) {
  const Move& m = plan_.schedule[mi];
  const GroupId g = m.group;
  const bool to_fast = m.to == plan_.fast_tier;
  if (g < where_.size() && !dead_[g] && where_[g] == (to_fast ? Where::to_slow : Where::to_fast) && pending_[g] == kNone) {
    pending_[g] = mi;  // its previous move is still running: this one follows it (ordered by an event)
    submitted_[mi] = true;
    return;
  }
  const bool there = g < where_.size() && (to_fast ? where_[g] == Where::slow : where_[g] == Where::fast);
  if (!there || dead_[g]) {
    ++result_.skipped_moves;
    done_[mi] = true;
    return;
  }
  where_[g] = to_fast ? Where::to_fast : Where::to_slow;  // reserved: no other move of it may start
  inflight_[g] = mi;
  submitted_[mi] = true;
  engine.submit(mi, to_fast, m.bytes);
}

ReplayResult PlanReplay::run() {
  const OpIndex n = timeline_.size();
  const std::size_t n_groups = plan_.groups.size();
  result_.policy = plan_.policy;
  budget_ = plan_.fast_budget_bytes ? static_cast<std::int64_t>(plan_.fast_budget_bytes) : INT64_MAX / 4;
  result_.budget_bytes = plan_.fast_budget_bytes;
  where_.assign(n_groups, Where::absent);
  pending_.assign(n_groups, kNone);
  inflight_.assign(n_groups, kNone);
  dead_.assign(n_groups, false);
  submitted_.assign(plan_.schedule.size(), false);
  done_.assign(plan_.schedule.size(), false);
  counted_.assign(plan_.schedule.size(), false);
  result_.moves.assign(plan_.schedule.size(), {});

  // Groups are born, grow page by page as tensors are allocated into them, and die.
  std::vector<std::vector<std::pair<GroupId, std::uint64_t>>> growing(static_cast<std::size_t>(std::max<OpIndex>(n, 1)));
  std::vector<std::vector<GroupId>> dying(growing.size());
  size_.assign(n_groups, 0);
  for (GroupId g = 0; g < n_groups; ++g) {
    const auto& life = lives_[g];
    std::size_t first_step = 0;
    if (life.exists_at_start()) {
      const bool fast = plan_.groups[g].home == plan_.fast_tier;
      where_[g] = fast ? Where::fast : Where::slow;
      size_[g] = life.size_at(0);
      if (fast) use_fast(static_cast<std::int64_t>(size_[g]));
      first_step = 1;
    }
    if (n == 0) continue;
    for (std::size_t k = first_step; k < life.sizes.size(); ++k)
      growing[static_cast<std::size_t>(std::min(life.sizes[k].first, n - 1))].push_back({g, life.sizes[k].second});
    if (!life.exists_at_end()) dying[static_cast<std::size_t>(life.death)].push_back(g);
  }
  std::vector<std::vector<std::size_t>> issued_after(static_cast<std::size_t>(n) + 1), needed_at(static_cast<std::size_t>(n) + 1);
  for (std::size_t i = 0; i < plan_.schedule.size(); ++i) {
    const Move& m = plan_.schedule[i];
    const OpIndex a = std::clamp<OpIndex>(m.issue_after, -1, n - 1);
    issued_after[static_cast<std::size_t>(a + 1)].push_back(i);
    if (m.to == plan_.fast_tier) needed_at[m.needed_by == kAfterIteration ? static_cast<std::size_t>(n) : static_cast<std::size_t>(std::clamp<OpIndex>(m.needed_by, 0, n))].push_back(i);
  }

  CopyEngine::Hooks hooks;
  hooks.can_start = [&](std::size_t mi) {
    const GroupId g = plan_.schedule[mi].group;
    return dead_[g] || room_for(size_[g]);
  };
  hooks.started = [&](std::size_t mi, double t) {
    const Move& m = plan_.schedule[mi];
    result_.moves[mi].start_ns = t;
    if (m.to == plan_.fast_tier && !dead_[m.group]) {
      use_fast(static_cast<std::int64_t>(size_[m.group]));
      counted_[mi] = true;
    }
  };
  hooks.finished = [&](std::size_t mi, double t) {
    const Move& m = plan_.schedule[mi];
    const GroupId g = m.group;
    result_.moves[mi].end_ns = t;
    done_[mi] = true;
    // Note [Remap gate] (migrate/gpu/group_mover.hpp): the compute streams wait while the moved
    // chunks are remapped; charged at the next op (less whatever that op stalled anyway).
    if (!dead_[g]) hold_pending_ += cost_.remap_hold_ns(m.bytes, m.to == plan_.fast_tier);
    inflight_[g] = kNone;
    const bool to_fast = m.to == plan_.fast_tier;
    if (to_fast) {
      result_.bytes_to_fast += m.bytes;
      ++result_.moves_to_fast;
      if (dead_[g]) {
        if (counted_[mi]) use_fast(-static_cast<std::int64_t>(size_[g]));  // died while coming in
      } else {
        where_[g] = Where::fast;
      }
    } else {
      result_.bytes_to_slow += m.bytes;
      ++result_.moves_to_slow;
      use_fast(-static_cast<std::int64_t>(size_[g]));
      if (!dead_[g]) where_[g] = Where::slow;
    }
    if (pending_[g] != kNone) {
      const std::size_t next = pending_[g];
      pending_[g] = kNone;
      issue(*engine_, next);
    }
  };
  CopyEngine engine(cost_, hooks);
  engine_ = &engine;
  for (auto mi : issued_after[0]) issue(engine, mi);

  double delay = 0;
  std::vector<TensorId> touched;
  for (OpIndex i = 0; i < n; ++i) {
    const double start = timeline_.begin(i) + delay;
    engine.advance_to(start);
    for (auto mi : needed_at[static_cast<std::size_t>(i)]) {
      if (!submitted_[mi]) continue;
      wait_until(engine, [&] { return done_[mi]; }, true);
      if (result_.moves[mi].end_ns > start) result_.moves[mi].late_ns = result_.moves[mi].end_ns - start;
    }
    for (auto [g, bytes] : growing[static_cast<std::size_t>(i)]) {
      if (where_[g] == Where::absent && !dead_[g])
        where_[g] = plan_.groups[g].home == plan_.fast_tier ? Where::fast : Where::slow;
      const std::uint64_t delta = bytes > size_[g] ? bytes - size_[g] : 0;
      size_[g] = std::max(size_[g], bytes);
      // A group coming in holds fast memory once its copy has started (the copy counts its size then).
      const bool holds = where_[g] == Where::fast || (where_[g] == Where::to_fast && inflight_[g] != kNone && counted_[inflight_[g]]);
      if (!holds) continue;
      if (!wait_until(engine, [&] { return room_for(delta); }, false)) ++result_.budget_overruns;
      use_fast(static_cast<std::int64_t>(delta));
    }
    const double ready = std::max(start, engine.now());
    result_.stall_ns += ready - start;
    delay += ready - start;
    if (hold_pending_ > 0) {  // a hold overlapping the stall costs nothing more
      const double held = std::max(0.0, hold_pending_ - (ready - start));
      result_.remap_hold_ns += held;
      delay += held;
      hold_pending_ = 0;
    }
    double extra = 0;
    if (timeline_.leaf(i)) {
      const auto& op = profile_.ops[static_cast<std::size_t>(i)];
      touched.assign(op.inputs.begin(), op.inputs.end());
      touched.insert(touched.end(), op.outputs.begin(), op.outputs.end());
      std::sort(touched.begin(), touched.end());
      touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
      std::uint64_t fast_b = 0, slow_b = 0;
      std::uint32_t slow_n = 0;
      for (TensorId t : touched) {
        if (t >= group_of_.size() || group_of_[t] == kNoGroup) continue;
        const GroupId g = group_of_[t];
        if (g >= where_.size()) continue;
        if (where_[g] == Where::slow || where_[g] == Where::to_fast) {
          slow_b += profile_.tensors[t].bytes;
          ++slow_n;
        } else {
          fast_b += profile_.tensors[t].bytes;
        }
      }
      extra = cost_.op_ns(timeline_.duration(i), fast_b, slow_b, slow_n) - timeline_.duration(i);
      result_.in_place_bytes += slow_b;
    }
    result_.in_place_ns += extra;
    delay += extra;
    // "After op i" is when op i ends, or when the next op starts if that is earlier (an op with
    // nested ops ends after them; its children are the next ops).
    const double end = timeline_.end(i) + delay;
    const double after = i + 1 < n ? std::min(end, timeline_.begin(i + 1) + delay) : end;
    engine.advance_to(after);
    if (opts_.record_occupancy) result_.occupancy.push_back({end, static_cast<std::uint64_t>(std::max<std::int64_t>(fast_used_, 0))});
    for (GroupId g : dying[static_cast<std::size_t>(i)]) {
      // A group still moving releases its fast memory when the copy lands (see finished()).
      if (where_[g] == Where::fast) use_fast(-static_cast<std::int64_t>(size_[g]));
      dead_[g] = true;
      where_[g] = Where::absent;
    }
    for (auto mi : issued_after[static_cast<std::size_t>(i) + 1]) issue(engine, mi);
  }
  double finish = timeline_.iteration_ns() + delay;
  engine.advance_to(finish);
  for (auto mi : needed_at[static_cast<std::size_t>(n)]) {
    if (!submitted_[mi]) continue;
    wait_until(engine, [&] { return done_[mi]; }, true);
  }
  while (!engine.idle()) {
    if (!wait_until(engine, [&] { return engine.idle(); }, true)) break;
  }
  result_.remap_hold_ns += hold_pending_;  // remaps after the last op still hold the next iteration
  finish += hold_pending_;
  hold_pending_ = 0;
  result_.step_ns = std::max(finish, engine.now());
  result_.note = cost_.assumptions.empty() ? "" : cost_.assumptions.front();
  if (opts_.count_mixed_pages) {
    result_.mixed_class_pages = plan_mixed_class_pages(profile_, plan_);
    result_.mixed_class_groups = plan_mixed_class_groups(plan_);
  }
  return result_;
}

}  // namespace

ReplayResult replay_plan(const Profile& profile, const Plan& plan, const TierModel& model, const ReplayOptions& opts) {
  return PlanReplay(profile, plan, model, opts, group_lives(profile, plan)).run();
}

ReplayResult replay_plan(const Profile& profile, const Plan& plan, const TierModel& model, const ReplayOptions& opts,
                         std::vector<GroupLife> lives) {
  return PlanReplay(profile, plan, model, opts, std::move(lives)).run();
}

}  // namespace tierpack::placer
