// Baseline policies for `tierpack replay` (see baselines.hpp, docs/simulator.md).
#include "placer/baselines.hpp"

#include <algorithm>
#include <set>

#include "placer/classify.hpp"
#include "placer/page_stats.hpp"
#include "placer/timeline.hpp"

namespace tierpack::placer {
namespace {

std::uint64_t round_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

// The device's tensors with their clamped lives, and per-op lists of births, deaths and touches.
struct TensorTable {
  explicit TensorTable(const Profile& p, int device) : classes(classify(p, device)) {
    const auto n = static_cast<std::size_t>(p.ops.size());
    births.resize(std::max<std::size_t>(n, 1));
    deaths.resize(births.size());
    touches.resize(births.size());
    index.assign(p.tensors.size(), -1);
    for (std::size_t k = 0; k < classes.tensors.size(); ++k) {
      const auto& t = classes.tensors[k];
      index[t.id] = static_cast<long>(k);
      if (t.birth == kBeforeIteration) before.push_back(k);
      else births[static_cast<std::size_t>(t.birth)].push_back(k);
      if (t.death != kAfterIteration) deaths[static_cast<std::size_t>(t.death)].push_back(k);
    }
    std::sort(before.begin(), before.end(), [&](std::size_t a, std::size_t b) {
      const auto &ra = p.tensors[classes.tensors[a].id], &rb = p.tensors[classes.tensors[b].id];
      return std::tuple(ra.address, ra.id) < std::tuple(rb.address, rb.id);
    });
    for (std::size_t i = 0; i < n; ++i) {
      auto& list = touches[i];
      for (auto t : p.ops[i].inputs)
        if (index[t] >= 0) list.push_back(static_cast<std::size_t>(index[t]));
      for (auto t : p.ops[i].outputs)
        if (index[t] >= 0) list.push_back(static_cast<std::size_t>(index[t]));
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
    }
  }
  Classification classes;
  std::vector<long> index;  // profile tensor id -> position in classes.tensors, or -1
  std::vector<std::size_t> before;  // alive at the start, in address order
  std::vector<std::vector<std::size_t>> births, deaths, touches;
};

// Extra time of op i when fraction fast[k] of each tensor it touches is on the fast tier; adds the
// bytes it touches on the slow tier to `slow_bytes`.
double in_place_extra(const Profile& p, const Timeline& tl, const TensorTable& tt, const CostModel& cost, OpIndex i,
                      const std::vector<double>& fast, std::uint64_t& slow_bytes) {
  if (!tl.leaf(i)) return 0;
  double fast_b = 0, slow_b = 0;
  std::uint32_t slow_n = 0;
  for (auto k : tt.touches[static_cast<std::size_t>(i)]) {
    const double bytes = static_cast<double>(p.tensors[tt.classes.tensors[k].id].bytes);
    fast_b += bytes * fast[k];
    slow_b += bytes * (1 - fast[k]);
    if (fast[k] < 1) ++slow_n;
  }
  slow_bytes += static_cast<std::uint64_t>(slow_b);
  const double d = tl.duration(i);
  return cost.op_ns(d, static_cast<std::uint64_t>(fast_b), static_cast<std::uint64_t>(slow_b), slow_n) - d;
}

ReplayResult base_result(const char* name, const Profile& p, const BaselineSetup& s) {
  ReplayResult r;
  r.policy = name;
  r.budget_bytes = s.budget;
  r.mixed_class_pages = profile_mixed_class_pages(p, s.device);
  return r;
}

// Placement fixed for the whole iteration (first-touch, interleave): the fast fraction of each tensor is
// decided when it is born by `place(k, free_bytes)`, which returns the fast bytes it takes.
template <class Place>
ReplayResult replay_static(ReplayResult r, const Profile& p, const BaselineSetup& s, Place place) {
  const Timeline tl(p);
  const TensorTable tt(p, s.device);
  const std::uint64_t page = s.device >= 0 ? (2ull << 20) : std::max<std::uint64_t>(p.meta.host_page_size, 4096);
  std::vector<double> fast(tt.classes.tensors.size(), 0);
  std::vector<std::uint64_t> taken(fast.size(), 0);
  std::uint64_t used = 0;
  auto born = [&](std::size_t k) {
    const std::uint64_t size = round_up(std::max<std::uint64_t>(p.tensors[tt.classes.tensors[k].id].bytes, 1), page);
    const std::uint64_t free = s.budget > used ? s.budget - used : 0;
    taken[k] = std::min(place(size, free / page * page), size);
    used += taken[k];
    fast[k] = static_cast<double>(taken[k]) / static_cast<double>(size);
    r.fast_peak_bytes = std::max(r.fast_peak_bytes, used);
  };
  for (auto k : tt.before) born(k);
  double delay = 0;
  for (OpIndex i = 0; i < tl.size(); ++i) {
    for (auto k : tt.births[static_cast<std::size_t>(i)]) born(k);
    const double extra = in_place_extra(p, tl, tt, s.cost, i, fast, r.in_place_bytes);
    r.in_place_ns += extra;
    delay += extra;
    for (auto k : tt.deaths[static_cast<std::size_t>(i)]) used -= taken[k];
    r.occupancy.push_back({tl.end(i) + delay, used});
  }
  r.step_ns = tl.iteration_ns() + delay;
  return r;
}

}  // namespace

BaselineSetup make_baseline_setup(const TierModel& model, int device, std::uint64_t budget) {
  BaselineSetup s;
  s.device = device;
  s.budget = budget;
  s.tiers = choose_tiers(model, device);
  s.cost = make_cost_model(model, s.tiers, device);
  return s;
}

ReplayResult replay_all_fast(const Profile& p, const BaselineSetup& s) {
  // Everything on the fast tier, whatever the budget: the reference, and whether it fits.
  BaselineSetup unlimited = s;
  unlimited.budget = UINT64_MAX;
  ReplayResult r = replay_static(base_result("all-fast", p, s), p, unlimited, [](std::uint64_t size, std::uint64_t) { return size; });
  r.step_ns = Timeline(p).iteration_ns();
  r.fast_peak_bytes = p.peak_bytes(s.device);
  r.fits = r.fast_peak_bytes <= s.budget;
  if (!r.fits) r.note = "does not fit: needs the whole peak on the fast tier";
  return r;
}

ReplayResult replay_first_touch(const Profile& p, const BaselineSetup& s) {
  return replay_static(base_result("first-touch", p, s), p, s, [](std::uint64_t size, std::uint64_t free) { return std::min(size, free); });
}

ReplayResult replay_interleave(const Profile& p, const BaselineSetup& s) {
  // Pages alternate between the two tiers; when the fast tier is full the rest spills to the slow one.
  return replay_static(base_result("interleave", p, s), p, s, [](std::uint64_t size, std::uint64_t free) {
    return std::min(size / 2, free);
  });
}

ReplayResult replay_lru(const Profile& p, const BaselineSetup& s) {
  ReplayResult r = base_result("lru", p, s);
  const Timeline tl(p);
  const TensorTable tt(p, s.device);
  const auto& cost = s.cost;
  const std::uint64_t page = s.device >= 0 ? (2ull << 20) : std::max<std::uint64_t>(p.meta.host_page_size, 4096);
  const std::size_t n_t = tt.classes.tensors.size();
  const OpIndex n = tl.size();
  std::vector<std::uint64_t> size(n_t);
  for (std::size_t k = 0; k < n_t; ++k) size[k] = round_up(std::max<std::uint64_t>(p.tensors[tt.classes.tensors[k].id].bytes, 1), page);
  std::vector<double> fast(n_t, 0);
  std::vector<std::int64_t> stamp(n_t, -1);
  std::set<std::pair<std::int64_t, std::size_t>> lru;  // tensors on the fast tier, least recent first
  std::uint64_t used = 0;
  std::vector<bool> protect(n_t, false);
  std::uint64_t out_bytes = 0, in_bytes = 0;
  std::uint32_t outs = 0, ins = 0;
  auto put_fast = [&](std::size_t k, std::int64_t st) {
    fast[k] = 1;
    stamp[k] = st;
    lru.insert({st, k});
    used += size[k];
    r.fast_peak_bytes = std::max(r.fast_peak_bytes, used);
  };
  auto drop = [&](std::size_t k) {
    if (fast[k] == 1) {
      lru.erase({stamp[k], k});
      used -= size[k];
    }
    fast[k] = 0;
  };
  // Evicts least recently used, unprotected tensors until `bytes` fit; false when they cannot.
  auto make_room = [&](std::uint64_t bytes) {
    if (bytes > s.budget) return false;
    auto it = lru.begin();
    while (used + bytes > s.budget && it != lru.end()) {
      const std::size_t k = it->second;
      ++it;
      if (protect[k]) continue;
      drop(k);
      out_bytes += size[k];
      ++outs;
    }
    return used + bytes <= s.budget;
  };
  for (int iter = 0; iter < 2; ++iter) {
    const bool measured = iter == 1;
    if (iter == 0) {
      for (auto k : tt.before)
        if (used + size[k] <= s.budget) put_fast(k, -1);
    } else {
      // Tensors born last iteration and still alive are this iteration's "before" tensors: whatever
      // is still live (persistent) keeps its place; the rest start where there is room.
      for (auto k : tt.before)
        if (tt.classes.tensors[k].death != kAfterIteration && fast[k] == 0 && used + size[k] <= s.budget) put_fast(k, n - 1);
      r.fast_peak_bytes = used;
    }
    double delay = 0, stall = 0, in_place = 0;
    std::uint64_t to_fast = 0, to_slow = 0, moves_in = 0, moves_out = 0, in_place_bytes = 0;
    for (OpIndex i = 0; i < n; ++i) {
      const std::int64_t st = static_cast<std::int64_t>(iter) * n + i;
      const auto& touch = tt.touches[static_cast<std::size_t>(i)];
      for (auto k : touch) protect[k] = true;
      out_bytes = in_bytes = 0;
      outs = ins = 0;
      for (auto k : tt.births[static_cast<std::size_t>(i)]) {
        drop(k);
        if (make_room(size[k])) put_fast(k, st);
      }
      for (auto k : touch) {
        if (fast[k] == 1) {
          lru.erase({stamp[k], k});
          stamp[k] = st;
          lru.insert({st, k});
          continue;
        }
        if (!make_room(size[k])) continue;  // read in place
        put_fast(k, st);
        in_bytes += size[k];
        ++ins;
      }
      double t = 0;
      if (in_bytes || out_bytes) {
        const double in_rate = in_bytes && out_bytes ? cost.shared_rate(true) : cost.to_fast_bytes_per_ns;
        const double out_rate = in_bytes && out_bytes ? cost.shared_rate(false) : cost.to_slow_bytes_per_ns;
        const double t_in = static_cast<double>(in_bytes) / in_rate, t_out = static_cast<double>(out_bytes) / out_rate;
        t = (cost.full_duplex ? std::max(t_in, t_out) : t_in + t_out) + (ins + outs) * cost.move_overhead_ns +
            cost.remap_hold_ns(in_bytes, true) + cost.remap_hold_ns(out_bytes, false);  // on demand: nothing overlaps
      }
      stall += t;
      delay += t;
      to_fast += in_bytes;
      to_slow += out_bytes;
      moves_in += ins;
      moves_out += outs;
      const double extra = in_place_extra(p, tl, tt, cost, i, fast, in_place_bytes);
      in_place += extra;
      delay += extra;
      for (auto k : touch) protect[k] = false;
      for (auto k : tt.deaths[static_cast<std::size_t>(i)]) drop(k);
      if (measured) r.occupancy.push_back({tl.end(i) + delay, used});
    }
    // Tensors born in this iteration that outlive it become next iteration's "before" tensors under
    // other ids; drop them so that they do not hold memory twice.
    for (std::size_t k = 0; k < n_t; ++k)
      if (tt.classes.tensors[k].birth != kBeforeIteration && tt.classes.tensors[k].death == kAfterIteration) drop(k);
    if (measured) {
      r.step_ns = tl.iteration_ns() + delay;
      r.stall_ns = stall;
      r.in_place_ns = in_place;
      r.in_place_bytes = in_place_bytes;
      r.bytes_to_fast = to_fast;
      r.bytes_to_slow = to_slow;
      r.moves_to_fast = moves_in;
      r.moves_to_slow = moves_out;
    }
  }
  return r;
}

}  // namespace tierpack::placer
