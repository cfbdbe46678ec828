// Migration schedule from an assignment, and late-prefetch refinement (see schedule.hpp).
#include "placer/schedule.hpp"

#include <algorithm>
#include <tuple>

#include "placer/plan_check.hpp"

namespace tierpack::placer {
namespace {

// Range add / range max over ops, for "would the budget still hold if this prefetch started earlier".
class OccupancyTree {
 public:
  explicit OccupancyTree(const std::vector<std::uint64_t>& v) {
    n_ = std::max<std::size_t>(v.size(), 1);
    max_.assign(4 * n_, 0);
    add_.assign(4 * n_, 0);
    build(1, 0, n_ - 1, v);
  }
  void add(std::size_t a, std::size_t b, std::int64_t d) { update(1, 0, n_ - 1, a, b, d); }
  std::int64_t max(std::size_t a, std::size_t b) const { return query(1, 0, n_ - 1, a, b); }

 private:
  void build(std::size_t k, std::size_t l, std::size_t r, const std::vector<std::uint64_t>& v) {
    if (l == r) {
      max_[k] = l < v.size() ? static_cast<std::int64_t>(v[l]) : 0;
      return;
    }
    const std::size_t m = (l + r) / 2;
    build(2 * k, l, m, v);
    build(2 * k + 1, m + 1, r, v);
    max_[k] = std::max(max_[2 * k], max_[2 * k + 1]);
  }
  void update(std::size_t k, std::size_t l, std::size_t r, std::size_t a, std::size_t b, std::int64_t d) {
    if (b < l || r < a) return;
    if (a <= l && r <= b) {
      max_[k] += d;
      add_[k] += d;
      return;
    }
    const std::size_t m = (l + r) / 2;
    update(2 * k, l, m, a, b, d);
    update(2 * k + 1, m + 1, r, a, b, d);
    max_[k] = std::max(max_[2 * k], max_[2 * k + 1]) + add_[k];
  }
  std::int64_t query(std::size_t k, std::size_t l, std::size_t r, std::size_t a, std::size_t b) const {
    if (b < l || r < a) return INT64_MIN / 2;
    if (a <= l && r <= b) return max_[k];
    const std::size_t m = (l + r) / 2;
    return std::max(query(2 * k, l, m, a, b), query(2 * k + 1, m + 1, r, a, b)) + add_[k];
  }
  std::size_t n_ = 1;
  std::vector<std::int64_t> max_, add_;
};

}  // namespace

void sort_moves(std::vector<Move>& moves) {
  std::stable_sort(moves.begin(), moves.end(), [](const Move& a, const Move& b) {
    return std::tuple(a.issue_after, a.kind != MoveKind::evict, a.group, a.needed_by) <
           std::tuple(b.issue_after, b.kind != MoveKind::evict, b.group, b.needed_by);
  });
}

std::vector<Move> make_moves(const Packing& packing, const Assignment& a, TierId fast, TierId slow) {
  std::vector<Move> moves;
  (void)packing;
  for (const auto& ex : a.excursions) {
    if (ex.evicts) moves.push_back({ex.group, MoveKind::evict, fast, slow, ex.evict_bytes, ex.evict_after, ex.evicted_by, 0, 0});
    if (ex.prefetches)
      moves.push_back({ex.group, MoveKind::prefetch, slow, fast, ex.prefetch_bytes, ex.prefetch_after, ex.needed_by, 0, 0});
  }
  sort_moves(moves);
  return moves;
}

std::size_t advance_late_prefetches(std::vector<Move>& moves, const std::vector<double>& late_ns,
                                    const std::vector<PageGroup>& groups, const std::vector<GroupLife>& lives,
                                    const Timeline& timeline, TierId fast, std::uint64_t budget) {
  const OpIndex n = timeline.size();
  if (n == 0) return 0;
  OccupancyTree occ(fast_occupancy(groups, lives, moves, fast, n));
  // The earliest op after which each prefetch may be issued: once its group's previous move arrived.
  std::vector<OpIndex> floor(moves.size(), kBeforeIteration);
  {
    std::vector<std::vector<std::size_t>> by_group(groups.size());
    for (std::size_t i = 0; i < moves.size(); ++i) by_group[moves[i].group].push_back(i);
    for (auto& v : by_group) {
      std::sort(v.begin(), v.end(), [&](std::size_t x, std::size_t y) { return moves[x].issue_after < moves[y].issue_after; });
      for (std::size_t k = 0; k < v.size(); ++k) {
        const GroupLife& life = lives[moves[v[k]].group];
        OpIndex f = k > 0 ? moves[v[k - 1]].needed_by : (life.exists_at_start() ? kBeforeIteration : life.birth);
        // Never before a use of the group that comes before the move's target (it would move under it).
        const OpIndex target = moves[v[k]].needed_by;
        const auto it = std::lower_bound(life.uses.begin(), life.uses.end(), target);
        if (it != life.uses.begin()) f = std::max(f, *std::prev(it));
        floor[v[k]] = f;
      }
    }
  }
  std::vector<std::size_t> late;
  for (std::size_t i = 0; i < moves.size(); ++i)
    if (moves[i].kind == MoveKind::prefetch && i < late_ns.size() && late_ns[i] > 0) late.push_back(i);
  std::sort(late.begin(), late.end(), [&](std::size_t x, std::size_t y) {
    return std::tuple(moves[x].needed_by, x) < std::tuple(moves[y].needed_by, y);
  });
  std::size_t advanced = 0;
  const auto cap = static_cast<std::int64_t>(budget);
  for (auto i : late) {
    Move& m = moves[i];
    const OpIndex p = m.issue_after;
    const OpIndex target = timeline.last_ended_by(timeline.ended_by(p) - late_ns[i]);
    OpIndex lo = std::max(target, floor[i]);
    if (lo >= p) continue;
    const auto bytes = static_cast<std::int64_t>(m.bytes);
    // Feasible issue points form a suffix [best, p]: find its start by binary search.
    auto fits = [&](OpIndex q) { return occ.max(static_cast<std::size_t>(q + 1), static_cast<std::size_t>(p)) + bytes <= cap; };
    if (!fits(p - 1)) continue;
    OpIndex good = p - 1, bad = lo - 1;
    if (fits(lo)) good = lo;
    else
      while (good - bad > 1) {
        const OpIndex mid = bad + (good - bad) / 2;
        (fits(mid) ? good : bad) = mid;
      }
    occ.add(static_cast<std::size_t>(good + 1), static_cast<std::size_t>(p), bytes);
    m.issue_after = good;
    ++advanced;
  }
  if (advanced) sort_moves(moves);
  return advanced;
}

}  // namespace tierpack::placer
