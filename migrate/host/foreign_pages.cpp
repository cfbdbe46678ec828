// ForeignPages: the registry of tensors from before the plan and their tier charges.
// See Note [Foreign pages] in foreign_pages.hpp.
#include "migrate/host/foreign_pages.hpp"

#include "core/error.hpp"

namespace tierpack::host {

ForeignPages::~ForeignPages() {
  std::lock_guard lock(mu_);
  for (const auto& [a, e] : entries_) {
    alloc_.release(e.tier, e.pages.bytes());
    alloc_.release(e.pinned_tier, e.pinned_bytes());
  }
}

ForeignPages::Entry ForeignPages::add(std::uintptr_t address, std::size_t bytes, GroupId group, TierId tier) {
  TIERPACK_EXPECTS(bytes > 0, "a foreign tensor must have bytes");
  TIERPACK_EXPECTS(alloc_.serves(tier), "foreign tensor on a tier the allocator does not serve");
  const std::uintptr_t page = alloc_.os().page_size();
  Entry e;
  e.address = address;
  e.bytes = bytes;
  e.group = group;
  e.tier = tier;
  e.pinned_tier = tier;
  // Whole pages only: a page shared with another tensor stays where it is.
  const std::uintptr_t b = (address + page - 1) & ~(page - 1);
  const std::uintptr_t end = (address + bytes) & ~(page - 1);
  if (b < end) e.pages = PageRange{b, end};
  std::lock_guard lock(mu_);
  auto next = entries_.lower_bound(address);
  if (next != entries_.end() && next->first < address + bytes)
    throw logic_error("foreign tensor at " + std::to_string(address) + " overlaps one registered at " +
                      std::to_string(next->first));
  if (next != entries_.begin()) {
    const Entry& prev = std::prev(next)->second;
    if (prev.address + prev.bytes > address)
      throw logic_error("foreign tensor at " + std::to_string(address) + " overlaps one registered at " +
                        std::to_string(prev.address));
  }
  e.id = next_id_++;
  alloc_.charge_resident(tier, bytes);
  entries_.emplace(address, e);
  return e;
}

bool ForeignPages::remove(std::uintptr_t address) noexcept {
  std::lock_guard lock(mu_);
  auto it = entries_.find(address);
  if (it == entries_.end()) return false;
  alloc_.release(it->second.tier, it->second.pages.bytes());
  alloc_.release(it->second.pinned_tier, it->second.pinned_bytes());
  entries_.erase(it);
  return true;
}

std::optional<ForeignPages::Entry> ForeignPages::find(std::uintptr_t address) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(address);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

std::vector<ForeignPages::Entry> ForeignPages::group_entries(GroupId group) const {
  std::vector<Entry> out;
  std::lock_guard lock(mu_);
  for (const auto& [a, e] : entries_)
    if (e.group == group) out.push_back(e);
  return out;
}

std::size_t ForeignPages::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

std::uint64_t ForeignPages::bytes_on(TierId tier) const {
  std::lock_guard lock(mu_);
  std::uint64_t n = 0;
  for (const auto& [a, e] : entries_) {
    if (e.tier == tier) n += e.pages.bytes();
    if (e.pinned_tier == tier) n += e.pinned_bytes();
  }
  return n;
}

std::vector<ForeignPages::Entry> ForeignPages::movable(GroupId group, TierId to) const {
  std::vector<Entry> out;
  std::lock_guard lock(mu_);
  for (const auto& [a, e] : entries_)
    if (e.group == group && e.tier != to && e.pages.bytes() > 0) out.push_back(e);
  return out;
}

std::uint64_t ForeignPages::movable_bytes(GroupId group, TierId to) const {
  std::uint64_t n = 0;
  for (const Entry& e : movable(group, to)) n += e.pages.bytes();
  return n;
}

std::uint64_t ForeignPages::set_tier(const std::vector<Entry>& moved, TierId to, std::uint64_t reserved) {
  std::lock_guard lock(mu_);
  for (const Entry& m : moved) {
    auto it = entries_.find(m.address);
    if (it == entries_.end() || it->second.id != m.id || it->second.tier == to) continue;  // freed meanwhile
    Entry& e = it->second;
    const std::uint64_t bytes = e.pages.bytes();
    // As HostArenaAllocator::set_group_tier: the reservation first, so nothing is counted twice.
    const std::uint64_t from_reserved = std::min<std::uint64_t>(reserved, bytes);
    reserved -= from_reserved;
    alloc_.release(e.tier, bytes);
    alloc_.charge_resident(to, bytes - from_reserved);
    e.tier = to;
  }
  return reserved;
}

}  // namespace tierpack::host
