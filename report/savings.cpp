// Profile-only offload estimate (see savings.hpp).
#include "report/savings.hpp"

#include <algorithm>
#include <queue>

namespace tierpack::report {

// Note [Profile-only savings estimate]
// Until the placer and its simulator are linked in, the report estimates what a budget costs from
// the profile alone, tensor by tensor and op step by op step (the time axis of timeline.hpp):
//  - a tensor may leave the fast tier during an idle gap (no op of the step uses it) that is long
//    enough to copy it out and back at the link bandwidth (out only, when the gap ends in its death);
//  - walking the steps, whenever live bytes minus offloaded bytes exceed the budget, it offloads the
//    idle tensors whose next use is farthest away (Belady's rule) until the step fits;
//  - a tensor alive across iterations whose wrap-around gap (last use -> next iteration's first use)
//    is used moves out and back once per iteration.
// It reports the bytes moved each way, the copy time of the busier direction and the lower bound
// step time max(iteration, copy time) (BRIEF.md, "physical floor"). It ignores page granularity,
// copy timing inside a gap and link contention, so it is optimistic: a floor, not a plan.
SavingsRow estimate_offload(const Profile& profile, const TimeAxis& axis, int device, std::uint64_t peak,
                            std::uint64_t budget, double bandwidth) {
  SavingsRow row;
  row.source = "estimate";
  row.budget_bytes = budget;
  row.saved_bytes = peak > budget ? peak - budget : 0;
  const OpIndex n = axis.ops();
  const auto steps = static_cast<std::size_t>(n) + 2;  // -1 .. n
  auto slot = [](OpIndex k) { return static_cast<std::size_t>(k + 1); };

  struct Gap {
    TensorId tensor;
    OpIndex first, last;  // steps it covers
    std::int64_t key;     // farther next use = larger
    bool death, wrap;
  };
  std::vector<Gap> gaps;
  std::vector<std::vector<std::uint32_t>> gap_starts(steps);
  std::vector<std::int64_t> live_delta(steps + 1, 0);

  for (const auto& t : profile.tensors) {
    if (t.device != device || t.bytes == 0) continue;
    const OpIndex born = std::clamp<OpIndex>(t.birth_op, -1, n);
    const OpIndex dies = t.death_op == kAfterIteration ? n : std::clamp<OpIndex>(t.death_op, born, n);
    live_delta[slot(born)] += static_cast<std::int64_t>(t.bytes);
    live_delta[slot(dies) + 1] -= static_cast<std::int64_t>(t.bytes);
    const double copy = static_cast<double>(t.bytes) / bandwidth * 1e9;
    const bool across = t.birth_op == kBeforeIteration && t.death_op == kAfterIteration;
    std::vector<OpIndex> uses;
    for (OpIndex u : t.uses)
      if (u >= born && u <= dies && (uses.empty() || uses.back() != u)) uses.push_back(u);
    auto add = [&](OpIndex first, OpIndex last, double length, std::int64_t key, bool death, bool wrap) {
      if (first > last) return;
      if (length < (death ? copy : 2 * copy)) return;
      gap_starts[slot(first)].push_back(static_cast<std::uint32_t>(gaps.size()));
      gaps.push_back({t.id, first, last, key, death, wrap});
    };
    if (uses.empty()) {
      // Never used: it only has to leave, once (and stays out when it outlives iterations).
      add(born, dies, axis.tensor_end(t) - axis.tensor_begin(t), n + 1, true, false);
      continue;
    }
    const double head = axis.op_begin(uses.front()) - axis.tensor_begin(t);
    const double tail = axis.tensor_end(t) - axis.op_end(uses.back());
    add(born, uses.front() - 1, across ? head + tail : head, uses.front(), false, across);
    for (std::size_t i = 1; i < uses.size(); ++i)
      add(uses[i - 1] + 1, uses[i] - 1, axis.op_begin(uses[i]) - axis.op_end(uses[i - 1]), uses[i], false, false);
    const bool dies_inside = t.death_op != kAfterIteration;
    add(uses.back() + 1, dies, across ? head + tail : tail, across ? n + 1 + uses.front() : n + 1,
        dies_inside, across);
  }

  std::vector<std::uint64_t> bytes_of(profile.tensors.size(), 0);
  for (const auto& t : profile.tensors) bytes_of[t.id] = t.bytes;
  std::vector<std::uint8_t> moved(profile.tensors.size(), 0);  // 1: moved mid-iteration, 2: wrap cycle
  // Offloaded gaps, by the step after their last one (when the bytes come back or the tensor is gone).
  std::vector<std::vector<std::uint32_t>> returns(steps + 1);
  using Entry = std::pair<std::int64_t, std::uint32_t>;  // (key, gap)
  std::priority_queue<Entry> heap;
  std::int64_t live = 0, offloaded = 0;
  std::uint64_t shortfall = 0;
  for (std::size_t s = 0; s < steps; ++s) {
    live += live_delta[s];
    for (auto g : returns[s]) {
      offloaded -= static_cast<std::int64_t>(bytes_of[gaps[g].tensor]);
      if (!gaps[g].death && !gaps[g].wrap) row.bytes_to_fast += bytes_of[gaps[g].tensor];
    }
    for (auto g : gap_starts[s]) heap.push({gaps[g].key, g});
    while (live - offloaded > static_cast<std::int64_t>(budget) && !heap.empty()) {
      const auto [key, g] = heap.top();
      heap.pop();
      const Gap& gap = gaps[g];
      if (slot(gap.last) < s) continue;  // gap already over
      const auto b = bytes_of[gap.tensor];
      offloaded += static_cast<std::int64_t>(b);
      returns[slot(gap.last) + 1].push_back(g);
      if (gap.wrap) {
        moved[gap.tensor] |= 2;
      } else {
        moved[gap.tensor] |= 1;
        row.bytes_to_slow += b;
      }
    }
    const std::int64_t over = live - offloaded - static_cast<std::int64_t>(budget);
    if (over > 0) shortfall = std::max(shortfall, static_cast<std::uint64_t>(over));
  }
  for (std::size_t i = 0; i < moved.size(); ++i) {
    if (moved[i] & 2) {  // one trip out and back per iteration, whichever part of the wrap gap it used
      row.bytes_to_slow += bytes_of[i];
      row.bytes_to_fast += bytes_of[i];
    }
    if (moved[i]) ++row.tensors_moved;
  }
  row.feasible = shortfall == 0;
  row.shortfall_bytes = shortfall;
  row.copy_ns = static_cast<double>(std::max(row.bytes_to_slow, row.bytes_to_fast)) / bandwidth * 1e9;
  row.step_ns = std::max(axis.end_ns(), row.copy_ns);
  return row;
}

}  // namespace tierpack::report
