// Counting pages that mix lifetime classes (see page_stats.hpp).
#include "placer/page_stats.hpp"

#include <algorithm>
#include <map>

#include "placer/classify.hpp"

namespace tierpack::placer {

std::uint64_t count_mixed_class_pages(std::vector<Extent> extents, std::uint64_t page_size) {
  if (extents.empty() || page_size == 0) return 0;
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) {
    return std::tuple(a.birth, a.address, a.bytes) < std::tuple(b.birth, b.address, b.bytes);
  });
  std::vector<std::size_t> by_death(extents.size());
  for (std::size_t i = 0; i < extents.size(); ++i) by_death[i] = i;
  std::sort(by_death.begin(), by_death.end(), [&](std::size_t a, std::size_t b) { return extents[a].death < extents[b].death; });
  auto first_page = [&](const Extent& e) { return e.address / page_size; };
  auto last_page = [&](const Extent& e) { return (e.address + std::max<std::uint64_t>(e.bytes, 1) - 1) / page_size; };
  std::multimap<std::uint64_t, std::size_t> live;  // start address -> extent
  std::vector<std::pair<std::uint64_t, std::uint64_t>> mixed;  // page ranges
  std::size_t next_birth = 0, next_death = 0;
  auto share = [&](const Extent& a, const Extent& b) {
    if (a.cls == b.cls) return;
    const std::uint64_t lo = std::max(first_page(a), first_page(b)), hi = std::min(last_page(a), last_page(b));
    if (lo <= hi) mixed.emplace_back(lo, hi);
  };
  while (next_birth < extents.size()) {
    const OpIndex t = extents[next_birth].birth;
    // Extents that died before t are gone.
    while (next_death < by_death.size() && extents[by_death[next_death]].death < t) {
      const std::size_t i = by_death[next_death++];
      auto [b, e] = live.equal_range(extents[i].address);
      for (auto it = b; it != e; ++it)
        if (it->second == i) {
          live.erase(it);
          break;
        }
    }
    for (; next_birth < extents.size() && extents[next_birth].birth == t; ++next_birth) {
      const Extent& x = extents[next_birth];
      const std::uint64_t lo = first_page(x) * page_size, hi = (last_page(x) + 1) * page_size;
      // Live extents starting inside x's pages...
      for (auto it = live.lower_bound(lo); it != live.end() && it->first < hi; ++it) share(x, extents[it->second]);
      // ...and those starting before that still reach into them (the nearest ones suffice when live
      // extents do not overlap, as in any allocator's layout).
      for (auto it = live.lower_bound(lo); it != live.begin();) {
        --it;
        const Extent& y = extents[it->second];
        if (y.address + std::max<std::uint64_t>(y.bytes, 1) <= lo) break;
        share(x, y);
      }
      live.emplace(x.address, next_birth);
    }
  }
  if (mixed.empty()) return 0;
  std::sort(mixed.begin(), mixed.end());
  std::uint64_t count = 0, cur_lo = mixed[0].first, cur_hi = mixed[0].second;
  for (std::size_t i = 1; i < mixed.size(); ++i) {
    if (mixed[i].first > cur_hi + 1) {
      count += cur_hi - cur_lo + 1;
      cur_lo = mixed[i].first;
      cur_hi = mixed[i].second;
    } else {
      cur_hi = std::max(cur_hi, mixed[i].second);
    }
  }
  return count + (cur_hi - cur_lo + 1);
}

namespace {
Extent extent_of(const TensorInfo& t, std::uint64_t address, std::uint64_t bytes, OpIndex n_ops) {
  return {address, bytes, t.cls, t.birth == kBeforeIteration ? OpIndex(-1) : t.birth,
          t.death == kAfterIteration ? n_ops : t.death};
}
}  // namespace

std::uint64_t plan_mixed_class_pages(const Profile& profile, const Plan& plan) {
  const Classification classes = classify(profile, plan.device);
  std::vector<const TensorInfo*> info(profile.tensors.size(), nullptr);
  for (const auto& t : classes.tensors) info[t.id] = &t;
  const auto n_ops = static_cast<OpIndex>(profile.ops.size());
  std::vector<Extent> extents;
  std::uint64_t page = 0;
  for (const auto& p : plan.placements) {
    if (p.tensor >= info.size() || !info[p.tensor] || p.group >= plan.groups.size()) continue;
    const auto& g = plan.groups[p.group];
    page = std::max(page, g.page_size);
    extents.push_back(extent_of(*info[p.tensor], g.offset + p.offset_in_group, p.bytes, n_ops));
  }
  return count_mixed_class_pages(std::move(extents), page);
}

std::uint64_t plan_mixed_class_groups(const Plan& plan) {
  std::vector<std::uint8_t> classes(plan.groups.size(), 0);
  for (const auto& p : plan.placements)
    if (p.group < classes.size()) classes[p.group] |= static_cast<std::uint8_t>(1u << static_cast<unsigned>(p.cls));
  return static_cast<std::uint64_t>(std::count_if(classes.begin(), classes.end(), [](std::uint8_t m) { return (m & (m - 1)) != 0; }));
}

std::uint64_t profile_mixed_class_pages(const Profile& profile, int device, std::uint64_t page_size) {
  if (page_size == 0) page_size = device >= 0 ? (2ull << 20) : std::max<std::uint64_t>(profile.meta.host_page_size, 4096);
  const Classification classes = classify(profile, device);
  const auto n_ops = static_cast<OpIndex>(profile.ops.size());
  std::vector<Extent> extents;
  for (const auto& t : classes.tensors) {
    const auto& rec = profile.tensors[t.id];
    if (rec.address == 0) continue;  // not recorded
    extents.push_back(extent_of(t, rec.address, rec.bytes, n_ops));
  }
  return count_mixed_class_pages(std::move(extents), page_size);
}

}  // namespace tierpack::placer
