// Tier assignment under a fast-tier budget (see assign.hpp).
#include "placer/assign.hpp"

#include <algorithm>
#include <queue>
#include <set>
#include <tuple>

namespace tierpack::placer {

// Note [Excursion selection]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every gap between two uses of a group is a candidate excursion. Its *saved range* is the ops during
// which the group's fast memory is free: from the first op that begins after the eviction (issued when
// the earlier use ends) has finished, to the last op that ends early enough for the prefetch to arrive
// before the next use begins — copy times from the cost model, each link to itself, times the slack.
// Groups alive at the iteration's start and end may also wrap: start on the slow tier, come in before
// their first use and leave after their last (variant "slow home"), or stay home on the fast tier and
// leave between their last use and the end (variant "fast home"); one of the two at most. A group
// that dies (or stays alive) long after its last use may leave without coming back.
//
// The sweep walks the ops in order, keeping the fast-tier occupancy of the decisions so far. Where an
// op is over budget it takes, among the candidates whose saved range covers that op, the one whose
// range reaches farthest ahead (Belady's rule: evict what is needed last), until the op fits. The sweep
// never revisits earlier ops, and every decision only lowers occupancy, so the result fits the budget
// at every op. When no candidate covers an over-budget op (gaps too short for the copies, or the op's
// own tensors exceed the budget), the group alive there with the fewest uses per byte is spilled: it
// lives on the slow tier and its uses read it in place — all its life, or, for a group born in the
// iteration, until the first gap after that op long enough to bring it in (it is born on the slow tier
// and prefetched for its later uses). O((ops + candidates) log).

namespace {

struct Candidate {
  Excursion ex;
  OpIndex s1 = 0, e1 = -1, s2 = 0, e2 = -1;  // saved ranges (the second only for slow-home wraps)
  std::uint64_t b1 = 0, b2 = 0;              // bytes saved over each (the group's size then)
  bool wrap = false;
  bool selected = false;
  bool consumed = false;  // taken by a partial spill (its prefetch) or made moot by one
};

class Sweep {
 public:
  Sweep(const Packing& p, const Timeline& t, const CostModel& c, const AssignOptions& o)
      : packing_(p), timeline_(t), cost_(c), opts_(o), n_(t.size()) {}

  Assignment run();

 private:
  void make_candidates(GroupId g);
  void add(Candidate c) {
    if (c.e1 < c.s1 && c.e2 < c.s2) return;
    if (c.e1 < c.s1) {  // only the second range: make it the first
      std::swap(c.s1, c.s2);
      std::swap(c.e1, c.e2);
    }
    const auto& life = packing_.lives[c.ex.group];
    c.b1 = life.size_at(c.s1);
    c.b2 = c.e2 >= c.s2 ? life.size_at(c.s2) : 0;
    c.ex.evict_bytes = c.ex.evicts ? life.size_at(c.ex.evict_after) : 0;
    c.ex.prefetch_bytes = !c.ex.prefetches ? 0
                          : c.ex.needed_by == kAfterIteration ? life.size_at(n_ - 1)
                                                              : life.size_at(std::max(c.ex.needed_by - 1, life.first_op()));
    cands_.push_back(c);
  }
  // Lowers occupancy by `bytes` over [a, b], for the ops the sweep has not passed yet.
  void lower(OpIndex a, OpIndex b, std::int64_t bytes, OpIndex now) {
    a = std::max(a, now);
    if (a > b) return;
    if (a == now) running_ -= bytes;
    else diff_[static_cast<std::size_t>(a)] -= bytes;
    diff_[static_cast<std::size_t>(b) + 1] += bytes;
  }
  void spill(GroupId g, OpIndex now);
  bool spill_until_next_gap(GroupId g, OpIndex now);
  // Lowers occupancy by the group's (growing) size over [a, b], from `now` on.
  void lower_group(GroupId g, OpIndex a, OpIndex b, std::int64_t sign, OpIndex now) {
    a = std::max(a, now);
    if (a > b) return;
    std::vector<std::int64_t>& d = diff_;
    const auto& life = packing_.lives[g];
    const std::uint64_t first = life.size_at(a);
    lower(a, b, sign * static_cast<std::int64_t>(first), now);
    std::uint64_t cur = first;
    for (const auto& [op, bytes] : life.sizes) {
      if (op <= a || op > b) continue;
      d[static_cast<std::size_t>(op)] -= sign * static_cast<std::int64_t>(bytes - cur);
      d[static_cast<std::size_t>(b) + 1] += sign * static_cast<std::int64_t>(bytes - cur);
      cur = bytes;
    }
  }

  const Packing& packing_;
  const Timeline& timeline_;
  const CostModel& cost_;
  const AssignOptions& opts_;
  OpIndex n_;
  std::vector<Candidate> cands_;
  std::vector<std::vector<std::size_t>> group_cands_;
  std::vector<bool> wrap_taken_, spilled_;
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::vector<std::size_t> partial_;   // per group: the gap whose prefetch ends a partial spill
  std::vector<OpIndex> partial_from_;  // per group: the op the partial spill was decided at
  std::vector<std::vector<GroupId>> back_on_fast_;  // per op: partially spilled groups that arrive
  std::vector<std::int64_t> diff_;
  std::int64_t running_ = 0;
};

void Sweep::make_candidates(GroupId g) {
  const auto& life = packing_.lives[g];
  const auto& uses = life.uses;
  // Copies take as long as the largest size the group reaches (an upper bound for early gaps).
  const std::uint64_t bytes = packing_.groups[g].bytes;
  const double t_out = opts_.transfer_slack * cost_.transfer_ns(bytes, false);
  const double t_in = opts_.transfer_slack * cost_.transfer_ns(bytes, true);
  const OpIndex last = life.last_op(n_);
  // After a use at u: the op from which an eviction issued when u ends counts as done, or n_.
  auto evicted_by = [&](OpIndex u) { return timeline_.first_beginning_at(timeline_.end(u) + t_out, u + 1); };
  // Before a use at v: the last op after which a prefetch can be issued and still arrive in time.
  auto prefetch_after = [&](OpIndex v) {
    const double latest = timeline_.begin(v) - t_in;
    return latest < 0 ? OpIndex(-2) : std::min(timeline_.last_ended_by(latest), v - 1);
  };
  for (std::size_t j = 0; j + 1 < uses.size(); ++j) {
    const OpIndex u = uses[j], v = uses[j + 1];
    if (v <= u + 1) continue;
    Candidate c;
    c.ex = {g, true, u, evicted_by(u), true, prefetch_after(v), v};
    c.s1 = c.ex.evicted_by;
    c.e1 = c.ex.prefetch_after;
    add(c);
  }
  const OpIndex u0 = uses.front(), ul = uses.back();
  const OpIndex f = evicted_by(ul);
  if (life.exists_at_start() && life.exists_at_end()) {
    const OpIndex p0 = prefetch_after(u0);
    // Slow home: in before the first use, out after the last. An eviction that cannot finish inside
    // the iteration holds its memory to the end and delays the next iteration until it is done (the
    // simulator drains copies before the step ends), so it saves nothing after the last use.
    if (p0 >= -1) {
      Candidate a;
      a.ex = {g, true, ul, f < n_ ? f : kAfterIteration, true, p0, u0};
      a.ex.evicts = true;
      a.s1 = 0;
      a.e1 = p0;
      a.s2 = f;
      a.e2 = n_ - 1;
      a.wrap = true;
      add(a);
    }
    const OpIndex q = timeline_.last_ended_by(timeline_.iteration_ns() - t_in);
    if (f <= q) {  // fast home: out after the last use, back before the iteration ends
      Candidate b;
      b.ex = {g, true, ul, f, true, q, kAfterIteration};
      b.s1 = f;
      b.e1 = q;
      b.wrap = true;
      add(b);
    }
    return;
  }
  if (life.exists_at_start()) {  // dies inside: may start on the slow tier
    const OpIndex p0 = prefetch_after(u0);
    if (p0 >= 0) {
      Candidate h;
      h.ex = {g, false, kBeforeIteration, kBeforeIteration, true, p0, u0};
      h.s1 = 0;
      h.e1 = p0;
      add(h);
    }
  }
  if (f <= last) {  // leaves after its last use for good
    Candidate t;
    t.ex = {g, true, ul, f, false, kAfterIteration, kAfterIteration};
    t.s1 = f;
    t.e1 = last;
    add(t);
  }
}

// A group born in the iteration may stay on the slow tier only until the first gap after `now` that is
// long enough to bring it in: it is allocated there, its uses until then read it in place, and a
// prefetch brings it to the fast tier for the uses after the gap (an activation written in place in
// forward and read from the fast tier in backward). False when there is no such gap.
bool Sweep::spill_until_next_gap(GroupId g, OpIndex now) {
  const auto& life = packing_.lives[g];
  if (life.exists_at_start() || packing_.groups[g].pinned) return false;
  std::size_t best = kNone;
  for (auto ci : group_cands_[g]) {
    const auto& c = cands_[ci];
    if (c.consumed || c.wrap || !c.ex.evicts || !c.ex.prefetches || c.ex.evict_after < now) continue;
    if (c.ex.prefetch_after < c.ex.evict_after) continue;  // would move while the use before the gap runs
    if (best == kNone || c.ex.evict_after < cands_[best].ex.evict_after) best = ci;
  }
  if (best == kNone) return false;
  // Worth it only when the uses after the gap would read more in place than the one copy that brings
  // the group in (both cross the same link).
  const OpIndex v = cands_[best].ex.needed_by;
  std::uint64_t later = 0;
  for (std::size_t k = 0; k < life.uses.size() && k < life.use_bytes.size(); ++k)
    if (life.uses[k] >= v) later += life.use_bytes[k];
  if (later <= cands_[best].ex.prefetch_bytes) return false;
  const OpIndex until = cands_[best].ex.prefetch_after;
  for (auto ci : group_cands_[g]) {
    auto& c = cands_[ci];
    if (c.s1 > until && ci != best) continue;  // after the prefetch: still available
    if (c.selected) {
      lower(c.s1, c.e1, -static_cast<std::int64_t>(c.b1), now);
      lower(c.s2, c.e2, -static_cast<std::int64_t>(c.b2), now);
      c.selected = false;
    }
    c.consumed = true;
  }
  lower_group(g, now, until, 1, now);
  partial_[g] = best;
  partial_from_[g] = now;
  if (until + 1 < n_) back_on_fast_[static_cast<std::size_t>(until) + 1].push_back(g);
  return true;
}

void Sweep::spill(GroupId g, OpIndex now) {
  spilled_[g] = true;
  const auto& life = packing_.lives[g];
  if (partial_[g] != kNone) {  // the partial spill is superseded: put its saving back first
    lower_group(g, partial_from_[g], cands_[partial_[g]].ex.prefetch_after, -1, now);
    partial_[g] = kNone;
  }
  for (auto ci : group_cands_[g]) {
    auto& c = cands_[ci];
    if (!c.selected) continue;
    c.selected = false;  // the excursion is moot: put its saving back, then take the whole life
    lower(c.s1, c.e1, -static_cast<std::int64_t>(c.b1), now);
    lower(c.s2, c.e2, -static_cast<std::int64_t>(c.b2), now);
  }
  lower_group(g, life.first_op(), life.last_op(n_), 1, now);
}

Assignment Sweep::run() {
  const std::size_t n_groups = packing_.groups.size();
  Assignment out;
  out.home_fast.assign(n_groups, true);
  out.spilled.assign(n_groups, false);
  const auto natural = natural_occupancy(packing_, n_);
  out.natural_peak = natural.empty() ? 0 : *std::max_element(natural.begin(), natural.end());
  out.peak = out.natural_peak;
  if (out.natural_peak <= opts_.budget || n_ == 0) return out;

  group_cands_.resize(n_groups);
  wrap_taken_.assign(n_groups, false);
  spilled_.assign(n_groups, false);
  partial_.assign(n_groups, kNone);
  partial_from_.assign(n_groups, 0);
  back_on_fast_.assign(static_cast<std::size_t>(n_), {});
  diff_.assign(static_cast<std::size_t>(n_) + 1, 0);
  // Groups alive at the start that nothing uses cost nothing on the slow tier.
  for (GroupId g = 0; g < n_groups; ++g) {
    if (packing_.lives[g].uses.empty()) {
      spill(g, 0);
      continue;
    }
    if (packing_.groups[g].pinned) continue;
    const std::size_t before = cands_.size();
    make_candidates(g);
    for (std::size_t ci = before; ci < cands_.size(); ++ci) group_cands_[g].push_back(ci);
  }
  // Candidates become available at the start of their saved ranges.
  std::vector<std::vector<std::pair<std::size_t, int>>> starting(static_cast<std::size_t>(n_));
  for (std::size_t ci = 0; ci < cands_.size(); ++ci) {
    starting[static_cast<std::size_t>(cands_[ci].s1)].push_back({ci, 1});
    if (cands_[ci].e2 >= cands_[ci].s2) starting[static_cast<std::size_t>(cands_[ci].s2)].push_back({ci, 2});
  }
  // Priority: farthest end first, then bigger, then lower group id, then candidate order.
  using Entry = std::tuple<OpIndex, std::uint64_t, std::int64_t, std::int64_t>;
  std::priority_queue<Entry> open;
  // Spill order among groups alive now: fewest uses per byte first, then bigger, then lower id.
  using Cold = std::tuple<double, std::int64_t, GroupId>;
  std::set<Cold> alive;
  std::vector<std::vector<GroupId>> born(static_cast<std::size_t>(n_)), gone(static_cast<std::size_t>(n_));
  for (GroupId g = 0; g < n_groups; ++g) {
    if (spilled_[g]) continue;
    born[static_cast<std::size_t>(packing_.lives[g].first_op())].push_back(g);
    gone[static_cast<std::size_t>(packing_.lives[g].last_op(n_))].push_back(g);
  }
  auto cold_key = [&](GroupId g) {
    const double density = double(packing_.lives[g].uses.size()) / double(std::max<std::uint64_t>(packing_.groups[g].bytes, 1));
    return Cold{density, -static_cast<std::int64_t>(packing_.groups[g].bytes), g};
  };
  const auto budget = static_cast<std::int64_t>(opts_.budget);
  std::int64_t peak = 0;
  for (OpIndex i = 0; i < n_; ++i) {
    running_ += diff_[static_cast<std::size_t>(i)];
    for (auto g : born[static_cast<std::size_t>(i)])
      if (!spilled_[g]) alive.insert(cold_key(g));
    for (auto g : back_on_fast_[static_cast<std::size_t>(i)])
      if (!spilled_[g] && i <= packing_.lives[g].last_op(n_)) alive.insert(cold_key(g));
    for (auto [ci, seg] : starting[static_cast<std::size_t>(i)]) {
      const auto& c = cands_[ci];
      const OpIndex e = seg == 1 ? c.e1 : c.e2;
      open.emplace(e, seg == 1 ? c.b1 : c.b2, -static_cast<std::int64_t>(c.ex.group), -static_cast<std::int64_t>(ci));
    }
    auto occupancy = [&] { return static_cast<std::int64_t>(natural[static_cast<std::size_t>(i)]) + running_; };
    while (occupancy() > budget && !open.empty()) {
      const auto [e, bytes, neg_g, neg_ci] = open.top();
      open.pop();
      auto& c = cands_[static_cast<std::size_t>(-neg_ci)];
      const GroupId g = c.ex.group;
      if (e < i || c.selected || c.consumed || spilled_[g] || (c.wrap && wrap_taken_[g])) continue;
      c.selected = true;
      if (c.wrap) wrap_taken_[g] = true;
      lower(c.s1, c.e1, static_cast<std::int64_t>(c.b1), i);
      lower(c.s2, c.e2, static_cast<std::int64_t>(c.b2), i);
    }
    while (occupancy() > budget && !alive.empty()) {
      const GroupId g = std::get<2>(*alive.begin());
      alive.erase(alive.begin());
      if (!spill_until_next_gap(g, i)) spill(g, i);
    }
    peak = std::max(peak, occupancy());
    for (auto g : gone[static_cast<std::size_t>(i)])
      if (!spilled_[g]) alive.erase(cold_key(g));
  }

  for (GroupId g = 0; g < n_groups; ++g) {
    out.spilled[g] = spilled_[g];
    if (spilled_[g]) {
      out.home_fast[g] = false;
      ++out.spilled_groups;
      out.spilled_bytes += packing_.groups[g].bytes;
      continue;
    }
    if (partial_[g] != kNone) {  // born on the slow tier, brought in after the gap
      Excursion ex = cands_[partial_[g]].ex;
      ex.evicts = false;
      ex.evict_after = ex.evicted_by = kBeforeIteration;
      ex.evict_bytes = 0;
      out.home_fast[g] = false;
      out.excursions.push_back(ex);
      ++out.partly_spilled_groups;
    }
    for (auto ci : group_cands_[g]) {
      const auto& c = cands_[ci];
      if (!c.selected) continue;
      if (!c.ex.evicts || (c.wrap && c.ex.needed_by != kAfterIteration)) out.home_fast[g] = false;
      out.excursions.push_back(c.ex);
    }
  }
  std::sort(out.excursions.begin(), out.excursions.end(), [](const Excursion& a, const Excursion& b) {
    // The first thing an excursion does: evict (after a use) or prefetch (for one that starts slow).
    const auto key = [](const Excursion& x) {
      return std::min(x.evicts ? x.evict_after : kAfterIteration, x.prefetches ? x.prefetch_after : kAfterIteration);
    };
    return std::tuple(a.group, key(a)) < std::tuple(b.group, key(b));
  });
  out.peak = static_cast<std::uint64_t>(std::max<std::int64_t>(peak, 0));
  return out;
}

}  // namespace

std::vector<std::uint64_t> natural_occupancy(const Packing& packing, OpIndex n_ops) {
  std::vector<std::int64_t> diff(static_cast<std::size_t>(std::max<OpIndex>(n_ops, 0)) + 1, 0);
  for (std::size_t g = 0; g < packing.groups.size(); ++g) {
    const auto& life = packing.lives[g];
    if (n_ops == 0) continue;
    add_group_bytes(diff, life, life.first_op(), life.last_op(n_ops), 1);
  }
  std::vector<std::uint64_t> out(static_cast<std::size_t>(std::max<OpIndex>(n_ops, 0)));
  std::int64_t run = 0;
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::uint64_t>(run += diff[i]);
  return out;
}

Assignment assign_tiers(const Packing& packing, const Timeline& timeline, const CostModel& cost, const AssignOptions& opts) {
  return Sweep(packing, timeline, cost, opts).run();
}

}  // namespace tierpack::placer
