// First-touch at page granularity on the profile's addresses (see first_touch_model.hpp).
#include "experiment/first_touch_model.hpp"

#include <algorithm>
#include <unordered_map>

#include "placer/classify.hpp"
#include "placer/page_stats.hpp"
#include "placer/timeline.hpp"

namespace tierpack::experiment {

placer::ReplayResult replay_first_touch_pages(const Profile& p, const placer::BaselineSetup& s) {
  placer::ReplayResult r;
  r.policy = "first-touch";
  r.budget_bytes = s.budget;
  r.mixed_class_pages = placer::profile_mixed_class_pages(p, s.device);
  const placer::Timeline tl(p);
  const std::uint64_t page = s.device >= 0 ? (2ull << 20) : std::max<std::uint64_t>(p.meta.host_page_size, 4096);
  const std::uint64_t fast_pages_max = s.budget / page;

  // The device's tensors, in the order their pages are first touched.
  std::vector<const TensorRecord*> order;
  for (const auto& t : p.tensors)
    if (t.device == s.device && t.bytes > 0) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const TensorRecord* a, const TensorRecord* b) {
    const bool ba = a->birth_op == kBeforeIteration, bb = b->birth_op == kBeforeIteration;
    if (ba != bb) return ba;
    if (ba) return std::tuple(a->address, a->id) < std::tuple(b->address, b->id);
    return std::tuple(a->birth_op, a->seq, a->id) < std::tuple(b->birth_op, b->seq, b->id);
  });
  std::unordered_map<std::uint64_t, bool> page_fast;  // page index -> on the fast tier
  std::uint64_t fast_pages = 0;
  std::vector<double> fast(p.tensors.size(), 1.0);
  for (const TensorRecord* t : order) {
    const std::uint64_t first = t->address / page, last = (t->address + t->bytes - 1) / page;
    std::uint64_t on_fast = 0;
    for (std::uint64_t q = first; q <= last; ++q) {
      auto [it, fresh] = page_fast.try_emplace(q, false);
      if (fresh && fast_pages < fast_pages_max) {
        it->second = true;
        ++fast_pages;
      }
      on_fast += it->second ? 1 : 0;
    }
    fast[t->id] = static_cast<double>(on_fast) / static_cast<double>(last - first + 1);
  }
  r.fast_peak_bytes = fast_pages * page;

  // Ops read their tensors in place with the fast fraction fixed above (placer::CostModel::op_ns).
  double delay = 0;
  for (OpIndex i = 0; i < tl.size(); ++i) {
    const auto& op = p.ops[static_cast<std::size_t>(i)];
    if (tl.leaf(i)) {
      std::vector<std::uint32_t> touched(op.inputs);
      touched.insert(touched.end(), op.outputs.begin(), op.outputs.end());
      std::sort(touched.begin(), touched.end());
      touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
      double fast_b = 0, slow_b = 0;
      std::uint32_t slow_n = 0;
      for (auto id : touched) {
        const auto& t = p.tensors[id];
        if (t.device != s.device) continue;
        const double bytes = static_cast<double>(t.bytes);
        fast_b += bytes * fast[id];
        slow_b += bytes * (1 - fast[id]);
        if (fast[id] < 1) ++slow_n;
      }
      r.in_place_bytes += static_cast<std::uint64_t>(slow_b);
      const double d = tl.duration(i);
      const double extra = s.cost.op_ns(d, static_cast<std::uint64_t>(fast_b), static_cast<std::uint64_t>(slow_b), slow_n) - d;
      r.in_place_ns += extra;
      delay += extra;
    }
    r.occupancy.push_back({tl.end(i) + delay, r.fast_peak_bytes});
  }
  r.step_ns = tl.iteration_ns() + delay;
  return r;
}

}  // namespace tierpack::experiment
