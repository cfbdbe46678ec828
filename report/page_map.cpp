// Page maps and group maps for the report (see page_map.hpp).
#include "report/page_map.hpp"

#include <algorithm>
#include <bit>
#include <map>

#include "report/summary.hpp"

namespace tierpack::report {
namespace {

std::uint64_t page_size_of(const Profile& profile, int device) {
  if (device < 0) return profile.meta.host_page_size ? profile.meta.host_page_size : 4096;
  for (const auto& tier : profile.topology.tiers)
    if (tier.kind == TierKind::gpu && tier.device == device && tier.page_size) return tier.page_size;
  return 2ull << 20;  // CUDA VMM granularity
}

struct Run {
  std::uint64_t begin, end;  // pages [begin, end)
  std::uint32_t mask;
};

// Splits the page ranges of the device's tensors into runs of constant class set.
std::vector<Run> page_runs(const Profile& profile, const std::vector<TensorClass>& classes, int device,
                           std::uint64_t ps, std::uint64_t& without_address) {
  struct Edge {
    std::uint64_t page;
    int cls;
    int delta;
  };
  std::vector<Edge> edges;
  for (const auto& t : profile.tensors) {
    if (t.device != device) continue;
    if (t.address == 0 || t.bytes == 0) {
      ++without_address;
      continue;
    }
    const int c = static_cast<int>(classes[t.id]);
    edges.push_back({t.address / ps, c, +1});
    edges.push_back({(t.address + t.bytes - 1) / ps + 1, c, -1});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.page < b.page; });
  std::vector<Run> runs;
  std::array<int, kTensorClassCount> count{};
  for (std::size_t i = 0; i < edges.size();) {
    const std::uint64_t page = edges[i].page;
    for (; i < edges.size() && edges[i].page == page; ++i) count[static_cast<std::size_t>(edges[i].cls)] += edges[i].delta;
    std::uint32_t mask = 0;
    for (int c = 0; c < kTensorClassCount; ++c)
      if (count[static_cast<std::size_t>(c)] > 0) mask |= 1u << c;
    if (mask != 0 && i < edges.size()) runs.push_back({page, edges[i].page, mask});
  }
  return runs;
}

}  // namespace

std::vector<DevicePageMap> build_page_maps(const Profile& profile, const std::vector<TensorClass>& classes,
                                           std::size_t max_cells) {
  std::vector<int> devices;
  for (const auto& t : profile.tensors)
    if (std::find(devices.begin(), devices.end(), t.device) == devices.end()) devices.push_back(t.device);
  std::sort(devices.begin(), devices.end());
  std::vector<DevicePageMap> maps;
  for (int d : devices) {
    DevicePageMap m;
    m.device = d;
    m.name = device_name(d);
    m.page_size = page_size_of(profile, d);
    const auto runs = page_runs(profile, classes, d, m.page_size, m.tensors_without_address);
    std::vector<std::uint64_t> cum(runs.size() + 1, 0);  // pages before run i
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const auto len = runs[i].end - runs[i].begin;
      cum[i + 1] = cum[i] + len;
      if (std::popcount(runs[i].mask) > 1) m.mixed_pages += len;
      else m.single_class_pages[static_cast<std::size_t>(std::countr_zero(runs[i].mask))] += len;
      if (i > 0 && runs[i].begin != runs[i - 1].end) ++m.address_gaps;
    }
    m.pages = cum.back();
    if (m.pages == 0) {
      maps.push_back(std::move(m));
      continue;
    }
    const std::uint64_t cells_max = std::max<std::uint64_t>(max_cells, 1);
    m.pages_per_cell = (m.pages + cells_max - 1) / cells_max;
    m.cells.assign(static_cast<std::size_t>((m.pages + m.pages_per_cell - 1) / m.pages_per_cell), 0);
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const auto first = cum[i] / m.pages_per_cell, last = (cum[i + 1] - 1) / m.pages_per_cell;
      for (auto c = first; c <= last; ++c) m.cells[static_cast<std::size_t>(c)] |= static_cast<std::uint8_t>(runs[i].mask);
    }
    // Mark the profile's notable pages (host page records) that fall inside this device's runs.
    for (const auto& page : profile.pages) {
      if (page.tensors.empty() || profile.tensors[page.tensors.front()].device != d) continue;
      const std::uint64_t p = page.address / m.page_size;
      auto it = std::upper_bound(runs.begin(), runs.end(), p, [](std::uint64_t v, const Run& r) { return v < r.begin; });
      if (page.false_shared) ++m.false_shared_pages;
      if (page.hidden_windows > 0) ++m.hidden_pages;
      if (it == runs.begin()) continue;
      const auto i = static_cast<std::size_t>(it - runs.begin() - 1);
      if (p >= runs[i].end) continue;
      auto& cell = m.cells[static_cast<std::size_t>((cum[i] + p - runs[i].begin) / m.pages_per_cell)];
      if (page.false_shared) cell |= kCellFalseShared;
      if (page.hidden_windows > 0) cell |= kCellHidden;
    }
    maps.push_back(std::move(m));
  }
  return maps;
}

GroupMap build_group_map(const Plan& plan, std::size_t max_cells) {
  GroupMap gm;
  std::vector<const PageGroup*> groups;
  for (const auto& g : plan.groups) groups.push_back(&g);
  std::stable_sort(groups.begin(), groups.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  gm.groups = groups.size();
  for (const auto* g : groups) {
    const auto c = static_cast<std::size_t>(g->cls);
    ++gm.groups_by_class[c];
    gm.bytes_by_class[c] += g->bytes;
    if (g->pinned) ++gm.pinned;
  }
  // With more groups than cells, consecutive groups share a cell drawn in the class holding most
  // of its bytes (and marked mixed when they differ).
  const std::size_t cap = std::max<std::size_t>(max_cells, 1);
  const std::size_t per_cell = std::max<std::size_t>(1, (groups.size() + cap - 1) / cap);
  for (std::size_t i = 0; i < groups.size(); i += per_cell) {
    GroupCell cell;
    cell.groups = 0;
    std::array<std::uint64_t, kTensorClassCount> by_class{};
    for (std::size_t j = i; j < std::min(groups.size(), i + per_cell); ++j) {
      cell.bytes += groups[j]->bytes;
      by_class[static_cast<std::size_t>(groups[j]->cls)] += groups[j]->bytes;
      cell.pinned = cell.pinned || groups[j]->pinned;
      ++cell.groups;
    }
    const auto top = std::max_element(by_class.begin(), by_class.end());
    cell.cls = static_cast<TensorClass>(top - by_class.begin());
    cell.mixed = std::count_if(by_class.begin(), by_class.end(), [](auto b) { return b > 0; }) > 1;
    gm.cells.push_back(cell);
  }
  return gm;
}

}  // namespace tierpack::report
