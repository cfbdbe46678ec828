// Pools of physical handles with permanent shadow mappings (see handle_pool.hpp).
#include "alloc/gpu/handle_pool.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace tierpack::gpu {

HandlePool::HandlePool(VmmBackend& backend, Residence where, std::size_t handle_bytes, std::size_t capacity,
                       std::size_t limit)
    : backend_(backend), where_(where), bytes_(handle_bytes), capacity_(std::max<std::size_t>(capacity, 1)) {
  TIERPACK_EXPECTS(handle_bytes > 0 && handle_bytes % backend.info().granularity == 0,
                   "handle size must be a multiple of the mapping granularity");
  shadow_base_ = backend_.reserve(capacity_ * bytes_);
  limit_ = std::min(limit, capacity_);
}

HandlePool::~HandlePool() {
  for (PooledHandle& h : idle_) destroy(h);
  idle_.clear();
  backend_.unreserve(shadow_base_, capacity_ * bytes_);
}

void HandlePool::destroy(PooledHandle h) noexcept {
  try {
    backend_.unmap(h.shadow, bytes_);
  } catch (...) {
    // The shadow mapping is ours alone; failing to unmap it leaks address space, never data.
  }
  backend_.release(h.phys);
}

PooledHandle HandlePool::try_acquire() {
  std::uint32_t slot = 0;
  {
    std::lock_guard lk(mutex_);
    if (!idle_.empty()) {
      PooledHandle h = idle_.back();
      idle_.pop_back();
      return h;
    }
    if (owned_ >= limit_ || (free_slots_.empty() && next_slot_ >= capacity_)) {
      last_failure_ = "limit of " + std::to_string(limit_) + " handles reached";
      return {};
    }
    ++owned_;
    if (free_slots_.empty()) {
      slot = static_cast<std::uint32_t>(next_slot_++);
    } else {
      slot = free_slots_.back();
      free_slots_.pop_back();
    }
  }
  // Create and map outside the lock: host handles take milliseconds to create.
  PooledHandle h;
  h.shadow = shadow_base_ + static_cast<std::uintptr_t>(slot) * bytes_;
  try {
    h.phys = backend_.create(where_, bytes_);
    try {
      backend_.map(h.shadow, h.phys);
    } catch (...) {
      backend_.release(h.phys);
      throw;
    }
    return h;
  } catch (const error& e) {
    std::lock_guard lk(mutex_);
    --owned_;
    free_slots_.push_back(slot);
    last_failure_ = e.what();
    if (dynamic_cast<const out_of_memory*>(&e) != nullptr) return {};
    throw;
  }
}

void HandlePool::put(PooledHandle h) noexcept {
  if (!h) return;
  {
    std::lock_guard lk(mutex_);
    if (owned_ <= limit_) {
      idle_.push_back(h);
      return;
    }
    --owned_;
    free_slots_.push_back(static_cast<std::uint32_t>((h.shadow - shadow_base_) / bytes_));
  }
  destroy(h);
}

std::size_t HandlePool::prewarm(std::size_t n) {
  std::vector<PooledHandle> made;
  for (;;) {
    {
      std::lock_guard lk(mutex_);
      if (idle_.size() + made.size() >= n) break;
    }
    PooledHandle h = try_acquire();
    if (!h) break;
    made.push_back(h);
  }
  std::lock_guard lk(mutex_);
  idle_.insert(idle_.end(), made.begin(), made.end());
  return idle_.size();
}

std::size_t HandlePool::trim(std::size_t keep_idle) noexcept {
  std::vector<PooledHandle> victims;
  {
    std::lock_guard lk(mutex_);
    while (idle_.size() > keep_idle) {
      victims.push_back(idle_.back());
      idle_.pop_back();
      --owned_;
      free_slots_.push_back(static_cast<std::uint32_t>((victims.back().shadow - shadow_base_) / bytes_));
    }
  }
  for (PooledHandle& h : victims) destroy(h);
  return victims.size();
}

void HandlePool::set_limit(std::size_t limit) noexcept {
  std::size_t excess = 0, idle = 0;
  {
    std::lock_guard lk(mutex_);
    limit_ = std::min(limit, capacity_);
    excess = owned_ > limit_ ? owned_ - limit_ : 0;
    idle = idle_.size();
  }
  if (excess > 0) trim(idle > excess ? idle - excess : 0);
}

std::size_t HandlePool::limit() const {
  std::lock_guard lk(mutex_);
  return limit_;
}
std::size_t HandlePool::owned() const {
  std::lock_guard lk(mutex_);
  return owned_;
}
std::size_t HandlePool::idle() const {
  std::lock_guard lk(mutex_);
  return idle_.size();
}
std::string HandlePool::last_failure() const {
  std::lock_guard lk(mutex_);
  return last_failure_;
}

}  // namespace tierpack::gpu
