// HostArenaAllocator: arenas per (class, tier), block records, budgets, address -> block lookup.
// See Note [Page groups on the host] in host_arena_allocator.hpp.
#include "alloc/host/host_arena_allocator.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "core/units.hpp"

namespace tierpack::host {

HostArenaAllocator::HostArenaAllocator(const Topology& topo, HostAllocatorOptions options)
    : os_(options.os != nullptr ? options.os : &system_os()), options_(options) {
  std::vector<Tier> host;
  for (const Tier& t : topo.tiers) {
    if (t.numa_node >= 0 && t.kind != TierKind::gpu) host.push_back(t);
  }
  if (host.empty()) {
    Tier t;
    t.id = 0;
    t.kind = TierKind::host_dram;
    t.name = "dram0";
    t.numa_node = 0;
    t.source = "default";
    host.push_back(t);
  }
  TierId max_id = 0;
  for (const Tier& t : host) max_id = std::max(max_id, t.id);
  states_.resize(static_cast<std::size_t>(max_id) + 1);
  for (const Tier& t : host) {
    if (t.numa_node >= os_->node_count()) {
      throw logic_error("tier " + t.name + " is on NUMA node " + std::to_string(t.numa_node) + ", but this machine has " +
                        std::to_string(os_->node_count()) + " node(s)");
    }
    auto st = std::make_unique<TierState>();
    st->info = t;
    for (int c = 0; c < kTensorClassCount; ++c) {
      ArenaSpec spec{static_cast<TensorClass>(c), t.id,           t.numa_node, options_.bind, options_.huge_pages,
                     options_.thread_caches,      options_.alignment};
      st->arenas[c] = std::make_unique<HostArena>(*os_, spec, options_.observer);
    }
    states_[t.id] = std::move(st);
    tiers_.push_back(t.id);
  }
  std::sort(tiers_.begin(), tiers_.end());
}

HostArenaAllocator::~HostArenaAllocator() = default;

bool HostArenaAllocator::serves(TierId tier) const noexcept {
  return tier < states_.size() && states_[tier] != nullptr;
}

HostArenaAllocator::TierState& HostArenaAllocator::state(TierId tier) const {
  if (!serves(tier)) throw logic_error("tier " + std::to_string(tier) + " is not a host tier of this allocator");
  return *states_[tier];
}

int HostArenaAllocator::node_of(TierId tier) const { return state(tier).info.numa_node; }
const Tier& HostArenaAllocator::tier_info(TierId tier) const { return state(tier).info; }

const HostArena& HostArenaAllocator::arena(TensorClass cls, TierId tier) const {
  return *state(tier).arenas[static_cast<int>(cls)];
}

bool HostArenaAllocator::charge(TierState& t, std::uint64_t bytes) {
  const std::uint64_t budget = t.budget.load(std::memory_order_relaxed);
  std::uint64_t cur = t.resident.load(std::memory_order_relaxed);
  do {
    if (budget != 0 && cur + bytes > budget) return false;
  } while (!t.resident.compare_exchange_weak(cur, cur + bytes, std::memory_order_relaxed));
  std::uint64_t peak = t.peak.load(std::memory_order_relaxed);
  while (cur + bytes > peak && !t.peak.compare_exchange_weak(peak, cur + bytes, std::memory_order_relaxed)) {
  }
  return true;
}

void HostArenaAllocator::uncharge(TierState& t, std::uint64_t bytes) noexcept {
  t.resident.fetch_sub(bytes, std::memory_order_relaxed);
}

void* HostArenaAllocator::allocate(std::size_t bytes, TensorClass cls, TierId tier, AllocationTag tag) {
  TierState& t = state(tier);
  HostArena& arena = *t.arenas[static_cast<int>(cls)];
  const std::size_t usable = arena.usable_size(bytes);
  if (usable == 0) {
    throw out_of_memory(bytes, t.info.name, 0, "larger than any jemalloc size class");
  }
  // Charge first and roll back on failure (as RMM's limiting adaptor does), so concurrent
  // allocations can never pass the budget together.
  if (!charge(t, usable)) {
    const std::uint64_t budget = t.budget.load(std::memory_order_relaxed);
    const std::uint64_t resident = t.resident.load(std::memory_order_relaxed);
    throw out_of_memory(bytes, t.info.name, resident < budget ? budget - resident : 0,
                        "budget " + format_bytes(budget) + ", resident " + format_bytes(resident) + " (" +
                            std::to_string(resident) + " B) on node " + std::to_string(t.info.numa_node));
  }
  void* p = arena.allocate(bytes);
  if (p == nullptr) {
    uncharge(t, usable);
    const int err = arena.last_hook_error();
    const std::uint64_t budget = t.budget.load(std::memory_order_relaxed);
    const std::uint64_t resident = t.resident.load(std::memory_order_relaxed);
    throw out_of_memory(bytes, t.info.name, budget == 0 ? 0 : (resident < budget ? budget - resident : 0),
                        "the OS refused memory on node " + std::to_string(t.info.numa_node) +
                            (err != 0 ? " (mmap/mbind errno " + std::to_string(err) + ")" : std::string{}) +
                            "; budget " + (budget == 0 ? std::string("unlimited") : format_bytes(budget)) +
                            ", resident " + format_bytes(resident));
  }
  try {
    std::lock_guard lock(mu_);
    records_.insert_or_assign(reinterpret_cast<std::uintptr_t>(p),
                              Record{bytes, usable, cls, tier, tier, tag.seq, tag.group});
    ++t.allocations;
  } catch (...) {
    arena.deallocate(p, bytes);
    uncharge(t, usable);
    throw;
  }
  return p;
}

void HostArenaAllocator::deallocate(void* p) noexcept {
  if (p == nullptr) return;
  const auto base = reinterpret_cast<std::uintptr_t>(p);
  Record r;
  {
    std::lock_guard lock(mu_);
    auto it = records_.find(base);
    if (it == records_.end()) {
      unknown_frees_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    r = it->second;
    records_.erase(it);
    --states_[r.tier]->allocations;
  }
  TierState& home = *states_[r.home];
  TierState& now = *states_[r.tier];
  if (r.tier != r.home) rehome_pages(r, base);
  uncharge(now, r.usable);
  home.arenas[static_cast<int>(r.cls)]->deallocate(p, r.bytes);
}

void HostArenaAllocator::rehome_pages(const Record& r, std::uintptr_t base) noexcept {
  // Only pages wholly inside the block: edge pages may hold live neighbours. The data is dead, so
  // purge instead of moving it; the next touch faults a zeroed page on the arena's node.
  const std::uintptr_t page = os_->page_size();
  const std::uintptr_t first = (base + page - 1) & ~(page - 1);
  const std::uintptr_t last = (base + r.usable) & ~(page - 1);
  if (last <= first) return;
  void* addr = reinterpret_cast<void*>(first);
  if (os_->bind(addr, last - first, states_[r.home]->info.numa_node, options_.bind, false) == 0) {
    os_->purge(addr, last - first, /*lazy=*/false);
  }
}

AllocationInfo HostArenaAllocator::info(std::uintptr_t base, const Record& r) {
  return AllocationInfo{reinterpret_cast<void*>(base), r.bytes, r.usable, r.cls, r.home, r.tier, r.seq, r.group};
}

std::optional<AllocationInfo> HostArenaAllocator::lookup(const void* addr) const {
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  std::lock_guard lock(mu_);
  auto it = records_.upper_bound(a);
  if (it == records_.begin()) return std::nullopt;
  --it;
  if (a >= it->first + std::max<std::size_t>(it->second.usable, 1)) return std::nullopt;
  return info(it->first, it->second);
}

bool HostArenaAllocator::retag(void* base, AllocationTag tag) {
  std::lock_guard lock(mu_);
  auto it = records_.find(reinterpret_cast<std::uintptr_t>(base));
  if (it == records_.end()) return false;
  it->second.seq = tag.seq;
  it->second.group = tag.group;
  return true;
}

void HostArenaAllocator::for_each(const std::function<void(const AllocationInfo&)>& f) const {
  std::lock_guard lock(mu_);
  for (const auto& [base, r] : records_) f(info(base, r));
}

std::vector<PageRange> HostArenaAllocator::group_ranges(GroupId group) const {
  const std::uintptr_t page = os_->page_size();
  std::vector<PageRange> out;
  std::lock_guard lock(mu_);
  for (const auto& [base, r] : records_) {  // address order, so merging is one pass
    if (r.group != group) continue;
    PageRange pr{base & ~(page - 1), (base + r.usable + page - 1) & ~(page - 1)};
    if (!out.empty() && pr.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, pr.end);
    } else {
      out.push_back(pr);
    }
  }
  return out;
}

std::uint64_t HostArenaAllocator::group_bytes(GroupId group) const {
  std::uint64_t total = 0;
  std::lock_guard lock(mu_);
  for (const auto& [base, r] : records_) {
    if (r.group == group) total += r.usable;
  }
  return total;
}

std::uint64_t HostArenaAllocator::set_group_tier(GroupId group, TierId to, std::uint64_t reserved,
                                                 const std::vector<PageRange>* ranges) {
  TierState& dst = state(to);
  std::uint64_t moved = 0;
  // Whether [base, base + usable) lies inside one of the (sorted, disjoint) moved ranges.
  auto covered = [ranges](std::uintptr_t base, std::size_t usable) {
    if (!ranges) return true;
    auto it = std::upper_bound(ranges->begin(), ranges->end(), base,
                               [](std::uintptr_t a, const PageRange& r) { return a < r.begin; });
    if (it == ranges->begin()) return false;
    --it;
    return base >= it->begin && base + usable <= it->end;
  };
  std::lock_guard lock(mu_);
  for (auto& [base, r] : records_) {
    if (r.group != group || r.tier == to || !covered(base, r.usable)) continue;
    TierState& src = *states_[r.tier];
    // Pages that moved are resident on the new tier whatever its budget says: the charge follows
    // the data (the plan, not the allocator, keeps moves within budget). The reservation is used up
    // first, so the bytes are never counted twice, not even for a moment.
    uncharge(src, r.usable);
    --src.allocations;
    const std::uint64_t from_reserved = std::min<std::uint64_t>(reserved, r.usable);
    reserved -= from_reserved;
    const std::uint64_t add = r.usable - from_reserved;
    const std::uint64_t now = dst.resident.fetch_add(add, std::memory_order_relaxed) + add;
    std::uint64_t peak = dst.peak.load(std::memory_order_relaxed);
    while (now > peak && !dst.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    ++dst.allocations;
    r.tier = to;
    moved += r.usable;
  }
  if (reserved > 0) uncharge(dst, reserved);  // the group shrank while it moved
  return moved;
}

bool HostArenaAllocator::reserve(TierId tier, std::uint64_t bytes) { return bytes == 0 || charge(state(tier), bytes); }

void HostArenaAllocator::charge_resident(TierId tier, std::uint64_t bytes) {
  TierState& t = state(tier);
  const std::uint64_t now = t.resident.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  std::uint64_t peak = t.peak.load(std::memory_order_relaxed);
  while (now > peak && !t.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void HostArenaAllocator::release(TierId tier, std::uint64_t bytes) noexcept {
  if (bytes == 0) return;
  try {
    uncharge(state(tier), bytes);
  } catch (...) {
    // state() throws only for a tier this allocator does not serve, which reserve() refused already
  }
}

void HostArenaAllocator::set_budget(TierId tier, std::uint64_t bytes) {
  state(tier).budget.store(bytes, std::memory_order_relaxed);
}

void HostArenaAllocator::reset_peak(TierId tier) {
  TierState& t = state(tier);
  t.peak.store(t.resident.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

TierUsage HostArenaAllocator::usage(TierId tier) const {
  const TierState& t = state(tier);
  TierUsage u;
  u.tier = tier;
  u.node = t.info.numa_node;
  u.budget = t.budget.load(std::memory_order_relaxed);
  u.resident = t.resident.load(std::memory_order_relaxed);
  u.peak = t.peak.load(std::memory_order_relaxed);
  {
    std::lock_guard lock(mu_);
    u.allocations = t.allocations;
  }
  for (const auto& a : t.arenas) u.mapped += a->mapped_bytes();
  return u;
}

}  // namespace tierpack::host
