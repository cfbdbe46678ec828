// The VMM mechanism's planner: from one traced iteration to a GPU migration plan (see vmm_plan.hpp).
#include "placer/vmm_plan.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <map>

#include "core/error.hpp"
#include "core/units.hpp"

// Note [Choosing what moves]
// Every chosen group costs its bytes each way on the link and its chunks' remaps behind the gate
// (Note [Remap gate] in migrate/gpu/group_mover.hpp), every iteration; it helps only at the ticks where it is away
// and the device would be over the budget. So groups are chosen one at a time for the highest tick
// still over the budget: among the groups away at that tick, the one that removes the most
// over-budget bytes x ticks per byte moved. A tick no group can lower (everything there is in use)
// is left to spill and the next highest is taken. Afterwards every choice the later ones made
// unnecessary (its group fits back under the budget at every tick it would be away) is dropped.
// On the GPT-2 large profile of bench/results/gpu-h200-2026-11-29-2 (op indices as the clock,
// build/bench/gpu/trace_plan_bytes) this moved 16.2 GiB each way at 60% of the natural peak where
// choosing by bytes x idle time moved 33.5, and the same 11.9 GiB at 75%, where that order was already
// close; with groups kept on the host (below) 60% moves 13.9 GiB and keeps 2.25 GiB on the host.

namespace tierpack::gpu {
namespace {

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

// A movable unit: one in-iteration tensor, or one segment of persistent tensors.
struct Unit {
  std::vector<std::uint32_t> tensors;
  std::uint64_t bytes = 0;
  bool persistent = false;
  std::int64_t order = 0;   // grouping order (birth, or segment address rank)
  std::int64_t a = 0;       // evict after this tick
  std::int64_t b = kNever;  // needed again at this tick (kNever: not in this iteration)
  bool cyclic = false;      // the idle window wraps to the next iteration (b < a)
};

// Largest idle window between uses. `cyclic` units (alive across iterations) may wrap around.
bool idle_window(std::vector<TracedUse> uses, std::int64_t end_tick, bool cyclic, std::int64_t death, Unit& u) {
  if (uses.empty()) return false;
  std::sort(uses.begin(), uses.end(), [](const TracedUse& x, const TracedUse& y) { return x.from < y.from; });
  std::int64_t best = -1;
  std::int64_t reach = uses.front().to;
  for (std::size_t i = 1; i < uses.size(); ++i) {
    if (uses[i].from - reach > best) {
      best = uses[i].from - reach;
      u.a = reach;
      u.b = uses[i].from;
      u.cyclic = false;
    }
    reach = std::max(reach, uses[i].to);
  }
  if (cyclic) {
    const std::int64_t wrap = end_tick - reach + uses.front().from;
    if (wrap > best) {
      best = wrap;
      u.a = reach;
      u.b = uses.front().from;
      u.cyclic = true;
    }
  } else if (death >= 0 && death - reach > best) {
    best = death - reach;  // idle until it dies: evict, bring the (empty) group back at death
    u.a = reach;
    u.b = kNever;
    u.cyclic = false;
  }
  return best > 0;
}

std::int64_t gap_of(const Unit& u, std::int64_t end_tick, std::int64_t death_or_end) {
  if (u.cyclic) return end_tick - u.a + u.b;
  return (u.b == kNever ? death_or_end : u.b) - u.a;
}

// Device occupancy over the iteration, one slot per tick (difference-free: direct add over ranges).
struct Occupancy {
  std::vector<std::int64_t> bytes;
  explicit Occupancy(std::int64_t ticks) : bytes(static_cast<std::size_t>(ticks) + 1, 0) {}
  std::int64_t n() const { return static_cast<std::int64_t>(bytes.size()); }
  void add(std::int64_t from, std::int64_t to, std::int64_t v) {  // [from, to)
    from = std::clamp<std::int64_t>(from, 0, n());
    to = std::clamp<std::int64_t>(to, 0, n());
    for (std::int64_t c = from; c < to; ++c) bytes[static_cast<std::size_t>(c)] += v;
  }
  std::int64_t peak(std::int64_t from = 0, std::int64_t to = -1) const {
    if (to < 0) to = n();
    std::int64_t p = 0;
    for (std::int64_t c = std::max<std::int64_t>(from, 0); c < std::min(to, n()); ++c)
      p = std::max(p, bytes[static_cast<std::size_t>(c)]);
    return p;
  }
};

}  // namespace

Plan plan_from_trace(const IterationTrace& trace, const VmmPlanOptions& o) {
  TIERPACK_EXPECTS(trace.clock_end >= 0, "trace clock must not be negative");
  TIERPACK_EXPECTS(o.chunk_bytes > 0, "chunk size must be positive");
  const std::int64_t end = trace.clock_end;
  Plan plan;
  plan.policy = "gpu-trace";
  plan.device = o.device;
  {
    Tier gpu;
    gpu.kind = TierKind::gpu;
    gpu.name = "gpu" + std::to_string(o.device);
    gpu.device = o.device;
    gpu.page_size = o.chunk_bytes;
    plan.fast_tier = plan.topology.add(gpu);
    Tier host;
    host.kind = TierKind::host_dram;
    host.name = "host";
    host.page_size = o.chunk_bytes;
    plan.slow_tier = plan.topology.add(host);
  }
  plan.fast_budget_bytes = o.budget;

  // Device occupancy with everything resident.
  Occupancy occ(end);
  for (const TracedTensor& t : trace.tensors) {
    TIERPACK_EXPECTS(t.death < 0 || t.death >= t.birth, "a traced tensor dies before it is born");
    occ.add(t.birth, t.death < 0 ? end + 1 : t.death, static_cast<std::int64_t>(t.bytes));
  }
  const std::int64_t natural_peak = occ.peak();
  plan.prediction.natural_peak_bytes = static_cast<std::uint64_t>(natural_peak);

  // ---- units
  std::vector<Unit> units;
  for (std::uint32_t i = 0; i < trace.tensors.size(); ++i) {
    const TracedTensor& t = trace.tensors[i];
    if (t.seq < 0 || t.bytes < o.min_tensor_bytes) continue;
    Unit u;
    u.tensors = {i};
    u.bytes = t.bytes;
    u.order = t.birth;
    std::vector<TracedUse> uses = t.uses;
    uses.push_back({t.birth, t.birth});
    if (!idle_window(uses, end, false, t.death, u)) continue;
    if (gap_of(u, end, t.death < 0 ? end : t.death) < o.min_gap) continue;
    units.push_back(std::move(u));
  }
  // Persistent tensors (alive at both ends) move by segment, only where the whole segment is theirs.
  std::map<std::uint64_t, std::vector<std::uint32_t>> by_segment;
  std::map<std::uint64_t, bool> pure;
  for (std::uint32_t i = 0; i < trace.tensors.size(); ++i) {
    const TracedTensor& t = trace.tensors[i];
    if (t.seq >= 0 || t.segment == 0) continue;
    by_segment[t.segment].push_back(i);
    auto [it, fresh] = pure.emplace(t.segment, true);
    if (t.death >= 0) it->second = false;
  }
  // Note [Segment slack]: a segment of persistent tensors holds its whole chunks on the device, free
  // space included, and a move or a stay on the host takes all of them off it. The occupancy counts the
  // free space too, so that taking a segment away lowers it by what it added (counting the tensors
  // alone and subtracting the segment made plans look 2.9 GiB lower than the device at 35% of GPT-2
  // large: bench/gpu/gpu_trace_twin, session 18).
  std::uint64_t slack = 0;
  for (auto& [seg, members] : by_segment) {
    if (!pure[seg]) continue;
    std::uint64_t held = 0;
    for (std::uint32_t m : members) held += trace.tensors[m].bytes;
    const std::uint64_t whole = trace.tensors[members.front()].segment_bytes;
    if (whole <= held) continue;
    occ.add(0, end + 1, static_cast<std::int64_t>(whole - held));
    slack += whole - held;
  }
  std::int64_t rank = 0;
  for (auto& [seg, members] : by_segment) {
    ++rank;
    if (!pure[seg] || !o.move_persistent) continue;
    Unit u;
    u.persistent = true;
    u.tensors = members;
    u.bytes = trace.tensors[members.front()].segment_bytes;
    u.order = rank;
    std::vector<TracedUse> uses;
    for (std::uint32_t m : members) uses.insert(uses.end(), trace.tensors[m].uses.begin(), trace.tensors[m].uses.end());
    if (!idle_window(uses, end, true, -1, u)) continue;
    if (gap_of(u, end, end) < o.min_gap) continue;
    units.push_back(std::move(u));
  }

  // ---- groups: consecutive units (in birth / address order) whose windows overlap well
  std::stable_sort(units.begin(), units.end(), [](const Unit& x, const Unit& y) {
    return std::tie(x.persistent, x.cyclic, x.order) < std::tie(y.persistent, y.cyclic, y.order);
  });
  std::vector<Unit> groups;
  for (Unit& u : units) {
    if (!groups.empty()) {
      Unit& g = groups.back();
      if (g.persistent == u.persistent && g.cyclic == u.cyclic && g.bytes + u.bytes <= o.group_bytes) {
        Unit merged = g;
        merged.a = std::max(g.a, u.a);
        merged.b = std::min(g.b, u.b);
        const std::int64_t gm = gap_of(merged, end, end), gg = gap_of(g, end, end), gu = gap_of(u, end, end);
        if (merged.b > merged.a || merged.cyclic) {
          if (gm >= o.min_gap && 4 * gm >= 3 * std::min(gg, gu)) {
            merged.tensors.insert(merged.tensors.end(), u.tensors.begin(), u.tensors.end());
            merged.bytes += u.bytes;
            g = std::move(merged);
            continue;
          }
        }
      }
    }
    groups.push_back(std::move(u));
  }

  // ---- choose groups: Note [Choosing what moves]
  const auto budget_eff = static_cast<std::int64_t>(static_cast<double>(o.budget) * o.headroom);
  struct Span {
    std::int64_t lo = 0, hi = 0;  // [lo, hi) ticks
  };
  // The ticks each group is away from the device: from its eviction (after the lag) until it is
  // needed again, or until it dies; cyclic groups wrap through the end of the iteration.
  std::vector<std::array<Span, 2>> away(groups.size());
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const Unit& g = groups[gi];
    const std::int64_t from = g.a + o.eviction_lag + 1;
    std::array<Span, 2>& s = away[gi];
    if (g.cyclic) {
      s[0] = {from, end + 1};
      s[1] = {0, g.b};
    } else {
      std::int64_t until = g.b;
      if (g.b == kNever) {
        until = 0;
        for (std::uint32_t m : g.tensors)
          until = std::max(until, trace.tensors[m].death < 0 ? end + 1 : trace.tensors[m].death);
      }
      s[0] = {from, until};
    }
    for (Span& sp : s) {
      sp.lo = std::clamp<std::int64_t>(sp.lo, 0, occ.n());
      sp.hi = std::clamp<std::int64_t>(sp.hi, sp.lo, occ.n());
    }
  }
  auto offloaded = [&](std::size_t gi, std::int64_t sign) {
    for (const Span& sp : away[gi]) occ.add(sp.lo, sp.hi, -sign * static_cast<std::int64_t>(groups[gi].bytes));
  };
  auto covers = [&](std::size_t gi, std::int64_t c) {
    for (const Span& sp : away[gi])
      if (c >= sp.lo && c < sp.hi) return true;
    return false;
  };
  std::vector<std::size_t> chosen;
  std::vector<char> resident(groups.size(), 0);
  if (o.budget > 0) {
    std::vector<char> taken(groups.size(), 0), stuck(static_cast<std::size_t>(occ.n()), 0);
    for (;;) {
      // The highest tick over the budget that some move can still lower.
      std::int64_t p = -1;
      for (std::int64_t c = 0; c < occ.n(); ++c) {
        const std::int64_t v = occ.bytes[static_cast<std::size_t>(c)];
        if (v > budget_eff && !stuck[static_cast<std::size_t>(c)] &&
            (p < 0 || v > occ.bytes[static_cast<std::size_t>(p)]))
          p = c;
      }
      if (p < 0) break;
      std::size_t best = groups.size();
      double best_score = -1;
      for (std::size_t gi = 0; gi < groups.size(); ++gi) {
        if (taken[gi] || !covers(gi, p)) continue;
        const auto bytes = static_cast<std::int64_t>(groups[gi].bytes);
        double gain = 0;  // over-budget bytes x ticks this move removes
        for (const Span& sp : away[gi])
          for (std::int64_t c = sp.lo; c < sp.hi; ++c)
            gain += static_cast<double>(
                std::clamp<std::int64_t>(occ.bytes[static_cast<std::size_t>(c)] - budget_eff, 0, bytes));
        const double score = gain / static_cast<double>(bytes);
        if (score > best_score || (score == best_score && groups[gi].bytes > groups[best].bytes)) {
          best_score = score;
          best = gi;
        }
      }
      if (best == groups.size()) {
        stuck[static_cast<std::size_t>(p)] = 1;  // nothing movable is away here: this tick spills
        continue;
      }
      offloaded(best, 1);
      taken[best] = 1;
      chosen.push_back(best);
    }
    // Later choices can make earlier ones unnecessary: give back every move whose group fits under
    // the budget at each tick it would be away.
    auto prune = [&] {
      for (std::size_t k = chosen.size(); k-- > 0;) {
        const std::size_t gi = chosen[k];
        const auto bytes = static_cast<std::int64_t>(groups[gi].bytes);
        bool fits = true;
        for (const Span& sp : away[gi])
          for (std::int64_t c = sp.lo; c < sp.hi && fits; ++c)
            fits = occ.bytes[static_cast<std::size_t>(c)] + bytes <= budget_eff;
        if (!fits) continue;
        offloaded(gi, -1);
        taken[gi] = 0;
        chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(k));
      }
    };
    prune();
    // Note [Groups that live on the host]: ticks no move can bring under the budget hold tensors in
    // use (the optimizer step touches every parameter, gradient and moment at once). Rather than let
    // whatever is allocated there spill, persistent groups whose bytes x uses are smallest stay in
    // host memory for good: evicted once, never prefetched, read and written in place over the link
    // by the few ops that use them.
    if (o.host_resident) {
      for (;;) {
        if (occ.peak() <= budget_eff) break;
        std::size_t best = groups.size();
        double best_score = 0;
        for (std::size_t gi = 0; gi < groups.size(); ++gi) {
          if (!groups[gi].persistent || resident[gi]) continue;
          const auto bytes = static_cast<std::int64_t>(groups[gi].bytes);
          double gain = 0;  // over-budget bytes x ticks it removes beyond what its moves remove
          for (std::int64_t c = 0; c < occ.n(); ++c)
            if (!(taken[gi] && covers(gi, c)))
              gain += static_cast<double>(
                  std::clamp<std::int64_t>(occ.bytes[static_cast<std::size_t>(c)] - budget_eff, 0, bytes));
          double traffic = 0;  // bytes the ops using it would read over the link per iteration
          for (std::uint32_t m : groups[gi].tensors)
            traffic += static_cast<double>(trace.tensors[m].bytes) *
                       static_cast<double>(std::max<std::size_t>(trace.tensors[m].uses.size(), 1));
          const double score = gain / std::max(traffic, 1.0);
          if (gain > 0 && score > best_score) {
            best_score = score;
            best = gi;
          }
        }
        if (best == groups.size()) break;
        if (taken[best]) {
          offloaded(best, -1);
          taken[best] = 0;
          chosen.erase(std::find(chosen.begin(), chosen.end(), best));
        }
        occ.add(0, occ.n(), -static_cast<std::int64_t>(groups[best].bytes));
        resident[best] = 1;
      }
      prune();
    }
  }
  const bool feasible = o.budget == 0 || occ.peak() <= budget_eff;  // no budget: nothing has to move

  // A page group of the plan for `g` with its tensors' placements, and its eviction after its last use.
  auto add_group = [&](const Unit& g) -> Move {
    const auto gb = static_cast<GroupId>(plan.groups.size());
    PageGroup pg;
    pg.id = gb;
    pg.cls = g.persistent ? TensorClass::persistent : TensorClass::activation;
    pg.home = plan.fast_tier;
    pg.page_size = o.chunk_bytes;
    pg.bytes = (g.bytes + o.chunk_bytes - 1) / o.chunk_bytes * o.chunk_bytes;
    pg.last_use = static_cast<OpIndex>(g.a);
    pg.first_use = g.b == kNever ? kAfterIteration : static_cast<OpIndex>(g.b);
    for (std::uint32_t m : g.tensors) {
      pg.tensors.push_back(m);
      const TracedTensor& t = trace.tensors[m];
      TensorPlacement p;
      p.tensor = m;
      p.seq = t.seq;
      p.address = t.address;
      p.bytes = t.bytes;
      p.cls = pg.cls;
      p.group = gb;
      plan.placements.push_back(p);
    }
    plan.groups.push_back(pg);

    Move ev;
    ev.group = gb;
    ev.kind = MoveKind::evict;
    ev.from = plan.fast_tier;
    ev.to = plan.slow_tier;
    ev.bytes = pg.bytes;
    ev.issue_after = static_cast<OpIndex>(g.a);
    plan.schedule.push_back(ev);
    return ev;
  };
  // Note [Groups that live on the host]: evicted after their last use, never brought back (the
  // eviction of later iterations finds nothing on the device and costs nothing).
  std::uint64_t resident_bytes = 0;
  std::size_t resident_groups = 0;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    if (!resident[gi]) continue;
    resident_bytes += add_group(groups[gi]).bytes;
    ++resident_groups;
  }

  // ---- prefetch issue points: as early as the budget allows, needed ones first
  std::stable_sort(chosen.begin(), chosen.end(),
                   [&](std::size_t x, std::size_t y) { return groups[x].b < groups[y].b; });
  for (std::size_t gi : chosen) {
    const Unit& g = groups[gi];
    const Move ev = add_group(g);
    plan.prediction.bytes_to_slow += ev.bytes;

    Move pf = ev;
    pf.kind = MoveKind::prefetch;
    std::swap(pf.from, pf.to);
    std::int64_t need = g.b;
    if (need == kNever) {  // dies on the host: bring the emptied group back (no copy) when it is dead
      need = 0;
      for (std::uint32_t m : g.tensors)
        need = std::max(need, trace.tensors[m].death < 0 ? end : trace.tensors[m].death);
      pf.bytes = 0;
    } else {
      plan.prediction.bytes_to_fast += ev.bytes;
    }
    // Earliest tick p in the idle window from which the group fits back under the budget until `need`.
    const std::int64_t v = static_cast<std::int64_t>(g.bytes);
    std::int64_t p = need;
    if (!g.cyclic) {
      for (std::int64_t c = need - 1; c > g.a + o.eviction_lag; --c) {
        if (occ.bytes[static_cast<std::size_t>(c)] + v > budget_eff) break;
        p = c;
      }
      occ.add(p, need, v);
    } else {
      // Walk back from `need` through the wrap.
      std::int64_t c = need - 1, steps = 0;
      const std::int64_t window = gap_of(g, end, end) - o.eviction_lag - 1;
      while (steps < window) {
        const std::int64_t cc = c < 0 ? c + end + 1 : c;
        if (occ.bytes[static_cast<std::size_t>(cc)] + v > budget_eff) break;
        occ.bytes[static_cast<std::size_t>(cc)] += v;
        p = cc;
        --c;
        ++steps;
      }
    }
    pf.issue_after = static_cast<OpIndex>(p - 1);
    pf.needed_by = static_cast<OpIndex>(need);
    plan.schedule.push_back(pf);
  }
  std::stable_sort(plan.schedule.begin(), plan.schedule.end(),
                   [](const Move& x, const Move& y) { return x.issue_after < y.issue_after; });
  std::stable_sort(plan.placements.begin(), plan.placements.end(),
                   [](const TensorPlacement& x, const TensorPlacement& y) { return x.seq < y.seq; });
  plan.prediction.fast_peak_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(occ.peak(), 0));
  if (o.budget == 0) {
    plan.notes.push_back("nothing has to move (no budget given, or the live peak fits it; natural peak " +
                         format_bytes(static_cast<std::uint64_t>(natural_peak)) + ")");
    return plan;
  }
  plan.notes.push_back(std::to_string(plan.groups.size() - resident_groups) + " page groups move; natural peak " +
                       format_bytes(static_cast<std::uint64_t>(natural_peak)) + ", predicted peak " +
                       format_bytes(plan.prediction.fast_peak_bytes) + " (budget " + format_bytes(o.budget) +
                       ", planned to " +
                       format_bytes(static_cast<std::uint64_t>(std::max<std::int64_t>(budget_eff, 0))) + "), " +
                       format_bytes(plan.prediction.bytes_to_slow) + " to host and " +
                       format_bytes(plan.prediction.bytes_to_fast) + " back per iteration");
  if (resident_groups > 0)
    plan.notes.push_back(std::to_string(resident_groups) + " groups of tensors alive across iterations (" +
                         format_bytes(resident_bytes) +
                         ") stay in host memory, read in place by the ops that use them");
  if (slack > 0)
    plan.notes.push_back("segments of tensors alive across iterations hold " + format_bytes(slack) +
                         " of free space, counted as device memory (it leaves and returns with them)");
  if (!feasible)
    plan.notes.push_back(
        "the budget cannot be met by moving traced tensors alone: the remaining peak spills to host memory");
  return plan;
}

}  // namespace tierpack::gpu
