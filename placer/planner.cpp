// make_plan: the placer's pipeline (see planner.hpp).
#include "placer/planner.hpp"

#include <algorithm>
#include <map>

#include "core/error.hpp"
#include "placer/assign.hpp"
#include "placer/classify.hpp"
#include "placer/cost_model.hpp"
#include "placer/pack.hpp"
#include "placer/plan_check.hpp"
#include "placer/replay.hpp"
#include "placer/schedule.hpp"
#include "placer/timeline.hpp"

namespace tierpack::placer {
namespace {

constexpr std::string_view kPolicies[] = {"page-aware", "page-agnostic"};
constexpr std::uint64_t kGpuGroupBytes = 32ull << 20;  // a VMM map cycle costs 3.7 ms/GiB at 32 MiB vs 45.6 at 2 MiB
constexpr std::uint64_t kHostGroupBytes = 2ull << 20;

std::uint64_t profile_signature(const Profile& p) {
  for (const auto& it : p.iterations)
    if (it.index == p.meta.profiled_iteration) return it.signature;
  return p.iterations.empty() ? 0 : p.iterations.front().signature;
}

}  // namespace

std::span<const std::string_view> plan_policies() { return kPolicies; }

int main_device(const Profile& profile) {
  std::map<int, std::uint64_t> bytes;
  for (const auto& t : profile.tensors) bytes[t.device] += t.bytes;
  int best = -1;
  std::uint64_t most = 0;
  for (const auto& [dev, b] : bytes)
    if (dev >= 0 && b > most) {
      best = dev;
      most = b;
    }
  return best;
}

std::uint64_t resolve_budget(const Profile& profile, const TierModel& model, const PlanOptions& opts) {
  const TierChoice tiers = choose_tiers(model, opts.device);
  const std::uint64_t capacity = model.at(tiers.fast).capacity_bytes;
  if (!opts.fast_budget.is_set()) return capacity;
  return std::min(opts.fast_budget.resolve(profile.peak_bytes(opts.device)), capacity);
}

Plan make_plan(const Profile& profile, const TierModel& model, const PlanOptions& opts) {
  if (std::find(std::begin(kPolicies), std::end(kPolicies), opts.policy) == std::end(kPolicies))
    throw logic_error("unknown plan policy '" + opts.policy + "' (accepted: page-aware, page-agnostic)");
  TIERPACK_EXPECTS(opts.transfer_slack >= 1.0, "transfer slack must be at least 1");
  validate_tier_model(model);
  const TierChoice tiers = choose_tiers(model, opts.device);
  const CostModel cost = make_cost_model(model, tiers, opts.device);
  const Tier& fast = model.at(tiers.fast);
  const std::uint64_t budget = resolve_budget(profile, model, opts);

  Plan plan;
  plan.policy = opts.policy;
  plan.profile_command = profile.meta.command;
  plan.profile_signature = profile_signature(profile);
  plan.profile_id = profile.meta.id;
  plan.device = opts.device;
  plan.fast_tier = tiers.fast;
  plan.slow_tier = tiers.slow == kNoTier ? tiers.fast : tiers.slow;
  plan.fast_budget_bytes = budget;
  plan.topology = model;
  if (!tiers.note.empty()) plan.notes.push_back(tiers.note);
  if (opts.fast_budget.is_set() && opts.fast_budget.resolve(profile.peak_bytes(opts.device)) > fast.capacity_bytes)
    plan.notes.push_back("budget capped at " + fast.name + "'s capacity");

  const Classification classes = classify(profile, opts.device);
  PackOptions pack_opts;
  pack_opts.policy = opts.policy == "page-aware" ? PackPolicy::page_aware : PackPolicy::allocation_order;
  pack_opts.page_size = fast.page_size;
  pack_opts.group_bytes = opts.group_bytes ? std::max(opts.group_bytes, fast.page_size)
                                           : (fast.kind == TierKind::gpu ? kGpuGroupBytes : kHostGroupBytes);
  pack_opts.alignment = fast.kind == TierKind::gpu ? 512 : 64;
  const Packing packing = pack(profile, classes, pack_opts);
  const Timeline timeline(profile);
  const Assignment assignment = assign_tiers(packing, timeline, cost, {budget, opts.transfer_slack});
  if (assignment.natural_peak > budget && tiers.slow == kNoTier)
    throw logic_error("the run needs " + format_bytes(assignment.natural_peak) + " on " + fast.name + " but the budget is " +
                      format_bytes(budget) + " and the tier model has no other tier to move to");

  plan.groups = packing.groups;
  for (std::size_t g = 0; g < plan.groups.size(); ++g) plan.groups[g].home = assignment.home_fast[g] ? plan.fast_tier : plan.slow_tier;
  plan.placements = packing.placements;
  std::vector<Move> moves = make_moves(packing, assignment, plan.fast_tier, plan.slow_tier);
  {
    // Prefetch as early as the budget allows (earliest-needed first): copies queue on the link, so a
    // prefetch that waits for its latest safe moment is often late.
    std::vector<double> asap(moves.size(), 1e300);
    advance_late_prefetches(moves, asap, plan.groups, packing.lives, timeline, plan.fast_tier, budget);
  }

  // Predict with the simulator; move prefetches it finds late earlier while the budget allows.
  ReplayOptions quiet;
  quiet.record_occupancy = false;
  quiet.count_mixed_pages = false;
  ReplayResult sim;
  for (int round = 0;; ++round) {
    plan.schedule = moves;
    sim = replay_plan(profile, plan, model, quiet, packing.lives);
    if (round >= opts.refine_rounds || moves.empty()) break;
    std::vector<double> late(moves.size());
    for (std::size_t i = 0; i < moves.size(); ++i) late[i] = sim.moves[i].late_ns;
    if (advance_late_prefetches(moves, late, plan.groups, packing.lives, timeline, plan.fast_tier, budget) == 0) break;
  }
  for (std::size_t i = 0; i < plan.schedule.size(); ++i) {
    plan.schedule[i].predicted_start_ns = std::max(0.0, sim.moves[i].start_ns);
    plan.schedule[i].predicted_end_ns = std::max(0.0, sim.moves[i].end_ns);
  }

  auto& pr = plan.prediction;
  const auto occupancy = fast_occupancy(plan.groups, packing.lives, plan.schedule, plan.fast_tier, timeline.size());
  pr.fast_peak_bytes = occupancy.empty() ? 0 : *std::max_element(occupancy.begin(), occupancy.end());
  pr.natural_peak_bytes = assignment.natural_peak;
  for (const auto& m : plan.schedule) (m.to == plan.fast_tier ? pr.bytes_to_fast : pr.bytes_to_slow) += m.bytes;
  pr.stall_ns = sim.stall_ns;
  pr.step_ns = sim.step_ns;
  pr.baseline_step_ns = timeline.iteration_ns();

  const std::uint64_t tensor_peak = profile.peak_bytes(opts.device);
  if (budget >= tensor_peak && assignment.natural_peak > budget)
    plan.notes.push_back("the tensors' peak (" + format_bytes(tensor_peak) + ") fits the budget, but their page groups need " +
                         format_bytes(assignment.natural_peak) + " (page rounding, partly filled groups): with a budget of at least " +
                         format_bytes(assignment.natural_peak) + " nothing moves");
  if (plan.schedule.empty() && assignment.spilled_groups == 0) {
    plan.notes.push_back("fits: " + format_bytes(assignment.natural_peak) + " of page groups within the " + format_bytes(budget) +
                         " budget; nothing moves");
  }
  std::uint32_t pinned = 0;
  std::uint64_t pinned_bytes = 0;
  for (const auto& g : plan.groups)
    if (g.pinned) {
      ++pinned;
      pinned_bytes += g.bytes;
    }
  if (pinned)
    plan.notes.push_back(std::to_string(pinned) + " pinned group(s) (" + format_bytes(pinned_bytes) +
                         ") hold tensors with hidden accesses and never move");
  if (assignment.partly_spilled_groups)
    plan.notes.push_back(std::to_string(assignment.partly_spilled_groups) + " group(s) are born on " +
                         model.at(plan.slow_tier).name + " and read in place until a gap lets them come in");
  if (assignment.spilled_groups)
    plan.notes.push_back(std::to_string(assignment.spilled_groups) + " group(s) (" + format_bytes(assignment.spilled_bytes) +
                         ") stay on " + model.at(plan.slow_tier).name + " and are read in place: no gap between their uses "
                         "was long enough to move them, or an op needs more than the budget");
  for (const auto& a : cost.assumptions) plan.notes.push_back("assumed: " + a);
  return plan;
}

}  // namespace tierpack::placer
