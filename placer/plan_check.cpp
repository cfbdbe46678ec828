// Fast-tier accounting and plan checking (see plan_check.hpp).
#include "placer/plan_check.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/units.hpp"
#include "placer/classify.hpp"

namespace tierpack::placer {
namespace {

// Moves of each group in the order they happen.
std::vector<std::vector<std::size_t>> moves_by_group(std::size_t n_groups, const std::vector<Move>& moves) {
  std::vector<std::vector<std::size_t>> out(n_groups);
  for (std::size_t i = 0; i < moves.size(); ++i)
    if (moves[i].group < n_groups) out[moves[i].group].push_back(i);
  for (auto& v : out)
    std::sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) {
      return std::tuple(moves[a].issue_after, moves[a].needed_by, a) < std::tuple(moves[b].issue_after, moves[b].needed_by, b);
    });
  return out;
}

std::string op_name(OpIndex op) {
  if (op == kBeforeIteration) return "the iteration start";
  if (op == kAfterIteration) return "the iteration end";
  return "op " + std::to_string(op);
}

}  // namespace

std::vector<std::uint64_t> fast_occupancy(const std::vector<PageGroup>& groups, const std::vector<GroupLife>& lives,
                                          const std::vector<Move>& moves, TierId fast, OpIndex n_ops) {
  const auto n = static_cast<std::size_t>(std::max<OpIndex>(n_ops, 0));
  std::vector<std::int64_t> diff(n + 1, 0);
  auto add = [&](OpIndex a, OpIndex b, const GroupLife& life) {
    if (a > b || n == 0) return;
    add_group_bytes(diff, life, a, b, 1);
  };
  const auto by_group = moves_by_group(groups.size(), moves);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const OpIndex lo = lives[g].first_op(), hi = lives[g].last_op(n_ops);
    bool counting = groups[g].home == fast;
    OpIndex from = lo;
    for (auto mi : by_group[g]) {
      const Move& m = moves[mi];
      if (m.to != fast) {  // eviction: holds the memory until it counts as done
        const OpIndex until = m.needed_by == kAfterIteration ? hi : std::min(m.needed_by - 1, hi);
        if (counting) add(std::max(from, lo), until, lives[g]);
        counting = false;
      } else if (!counting) {  // prefetch: holds the destination from its issue on
        from = std::max(m.issue_after + 1, lo);
        counting = true;
      }
    }
    if (counting) add(std::max(from, lo), hi, lives[g]);
  }
  std::vector<std::uint64_t> out(n);
  std::int64_t run = 0;
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint64_t>(run += diff[i]);
  return out;
}

std::vector<GroupLife> group_lives(const Profile& profile, const Plan& plan) {
  const Classification classes = classify(profile, plan.device);
  std::vector<const TensorInfo*> info(profile.tensors.size(), nullptr);
  for (const auto& t : classes.tensors) info[t.id] = &t;
  std::vector<GroupLife> lives(plan.groups.size());
  std::vector<bool> at_start(plan.groups.size(), false), at_end(plan.groups.size(), false);
  std::vector<OpIndex> birth(plan.groups.size(), kAfterIteration), death(plan.groups.size(), kBeforeIteration);
  std::vector<std::vector<std::pair<OpIndex, std::uint64_t>>> extents(plan.groups.size());
  for (const auto& p : plan.placements) {
    if (p.group >= plan.groups.size() || p.tensor >= info.size() || !info[p.tensor]) continue;
    const TensorInfo& t = *info[p.tensor];
    auto& life = lives[p.group];
    extents[p.group].emplace_back(t.birth, p.offset_in_group + p.bytes);
    if (t.birth == kBeforeIteration) at_start[p.group] = true;
    else birth[p.group] = std::min(birth[p.group], t.birth);
    if (t.death == kAfterIteration) at_end[p.group] = true;
    else death[p.group] = std::max(death[p.group], t.death);
    life.uses.insert(life.uses.end(), t.uses.begin(), t.uses.end());
  }
  for (std::size_t g = 0; g < lives.size(); ++g) {
    auto& life = lives[g];
    life.birth = at_start[g] ? kBeforeIteration : birth[g];
    life.death = at_end[g] ? kAfterIteration : death[g];
    if (!at_start[g] && birth[g] == kAfterIteration) life.birth = 0;  // no members: treat as an empty op range
    if (!at_end[g] && death[g] == kBeforeIteration) life.death = std::max<OpIndex>(life.birth, 0);
    std::sort(life.uses.begin(), life.uses.end());
    life.uses.erase(std::unique(life.uses.begin(), life.uses.end()), life.uses.end());
    // The group grows page by page as its tensors are born (the same rule as the packer's).
    const std::uint64_t page = std::max<std::uint64_t>(plan.groups[g].page_size, 1);
    auto& ext = extents[g];
    std::sort(ext.begin(), ext.end());
    std::uint64_t high = 0;
    for (const auto& [op, end] : ext) {
      high = std::max(high, end);
      grow_group(life, op, (high + page - 1) / page * page);
    }
    if (life.sizes.empty()) grow_group(life, life.first_op(), plan.groups[g].bytes);
  }
  return lives;
}

bool readable_by(int device, const Tier& tier) {
  if (tier.kind == TierKind::gpu) return device >= 0 && tier.device == device;
  return true;
}

PlanCheck check_plan(const Profile& profile, const Plan& plan, std::size_t max_problems) {
  PlanCheck out;
  auto problem = [&](std::string text) {
    if (out.problems.size() < max_problems) out.problems.push_back(std::move(text));
  };
  try {
    plan.validate();
  } catch (const error& e) {
    problem(e.what());
    return out;
  }
  const auto n_ops = static_cast<OpIndex>(profile.ops.size());
  const auto& topo = plan.topology;
  if (plan.fast_tier >= topo.tiers.size()) {
    problem("the plan's fast tier is not in its topology");
    return out;
  }
  const bool has_slow = plan.slow_tier < topo.tiers.size();
  // Placements and tensors correspond one to one.
  std::vector<int> placed(profile.tensors.size(), 0);
  for (const auto& p : plan.placements) {
    if (p.tensor >= profile.tensors.size()) {
      problem("placement of tensor " + std::to_string(p.tensor) + ": no such tensor in the profile");
      continue;
    }
    const auto& t = profile.tensors[p.tensor];
    if (t.device != plan.device || t.bytes != p.bytes || t.seq != p.seq)
      problem("placement of tensor " + std::to_string(p.tensor) + " does not match the profile (device, size or seq)");
    ++placed[p.tensor];
  }
  for (const auto& t : profile.tensors)
    if (t.device == plan.device && placed[t.id] != 1)
      problem("tensor " + std::to_string(t.id) + " is placed " + std::to_string(placed[t.id]) + " times");

  const auto lives = group_lives(profile, plan);
  const auto by_group = moves_by_group(plan.groups.size(), plan.schedule);
  const bool slow_readable = has_slow && readable_by(plan.device, topo.at(plan.slow_tier));
  const bool fast_readable = readable_by(plan.device, topo.at(plan.fast_tier));
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const auto& group = plan.groups[g];
    const auto& life = lives[g];
    const std::string name = "group " + std::to_string(g);
    if (group.home != plan.fast_tier && group.home != plan.slow_tier) problem(name + ": home is neither plan tier");
    if (group.pinned && !by_group[g].empty()) problem(name + " is pinned (hidden accesses) but moves");
    bool on_fast = group.home == plan.fast_tier;
    OpIndex last_needed = kBeforeIteration - 1;
    std::size_t next_use = 0;
    const auto& uses = life.uses;
    // Uses up to (excluding) op `until` happen in the current state.
    // Once a group has been on the fast tier, it is planned to be there at each use: only groups that
    // never move, and groups born on the slow tier before their first prefetch, are read in place. A
    // use on the slow tier after that is a late or missing prefetch.
    bool been_fast = on_fast;
    auto uses_until = [&](OpIndex until) {
      for (; next_use < uses.size() && uses[next_use] < until; ++next_use) {
        if (!on_fast) ++out.in_place_uses;
        if (!on_fast && been_fast)
          problem(name + " is used at op " + std::to_string(uses[next_use]) + " on the slow tier although it moves (a prefetch is late or missing)");
        if (on_fast ? !fast_readable : !slow_readable)
          problem(name + ": used at op " + std::to_string(uses[next_use]) + " on a tier device " +
                  std::to_string(plan.device) + " cannot read");
      }
    };
    for (auto mi : by_group[g]) {
      const Move& m = plan.schedule[mi];
      const bool to_fast = m.to == plan.fast_tier;
      const std::string what = name + ": " + std::string(to_string(m.kind)) + " issued after " + op_name(m.issue_after);
      if ((to_fast && m.from != plan.slow_tier) || (!to_fast && (m.from != plan.fast_tier || m.to != plan.slow_tier)))
        problem(what + " does not move between the plan's two tiers");
      if ((m.kind == MoveKind::prefetch) != to_fast) problem(what + ": kind does not match its direction");
      if (to_fast == on_fast) problem(what + ": the group is already there");
      if (m.issue_after < (life.exists_at_start() ? kBeforeIteration : life.birth))
        problem(what + ": before the group exists");
      if (m.needed_by != kAfterIteration && m.needed_by <= m.issue_after) problem(what + ": needed before it is issued");
      if (m.needed_by == kAfterIteration && !life.exists_at_end()) problem(what + ": the group does not outlive the iteration");
      if (m.issue_after < last_needed) problem(what + ": issued before the group's previous move arrived");
      uses_until(m.issue_after + 1);
      for (; next_use < uses.size() && uses[next_use] < m.needed_by; ++next_use)
        problem(name + " is used at op " + std::to_string(uses[next_use]) + " while it moves (" + std::string(to_string(m.kind)) +
                " after " + op_name(m.issue_after) + ", needed by " + op_name(m.needed_by) + ")");
      on_fast = to_fast;
      been_fast = been_fast || to_fast;
      last_needed = m.needed_by;
    }
    uses_until(kAfterIteration);
    if (life.exists_at_start() && life.exists_at_end() && on_fast != (group.home == plan.fast_tier))
      problem(name + " ends the iteration on another tier than it started (not a steady state)");
  }
  out.occupancy = fast_occupancy(plan.groups, lives, plan.schedule, plan.fast_tier, n_ops);
  for (std::size_t i = 0; i < out.occupancy.size(); ++i) {
    out.fast_peak = std::max(out.fast_peak, out.occupancy[i]);
    if (plan.fast_budget_bytes && out.occupancy[i] > plan.fast_budget_bytes)
      problem("fast tier holds " + format_bytes(out.occupancy[i]) + " during op " + std::to_string(i) + ", over the budget of " +
              format_bytes(plan.fast_budget_bytes));
  }
  return out;
}

}  // namespace tierpack::placer
