// FaultInjectingOs: injected errno per call and status per page (see fault_injecting_os.hpp).
#include "platform/fault_injecting_os.hpp"

#include <vector>

namespace tierpack::host {

void FaultInjectingOs::fail_next(OsCall call, int err, int times, bool moving_only) {
  std::lock_guard lock(mu_);
  call_faults_[static_cast<int>(call)] = CallFault{err, times, moving_only};
}

void FaultInjectingOs::fail_page(const void* addr, int status, int times) {
  const auto page = reinterpret_cast<std::uintptr_t>(addr) & ~(static_cast<std::uintptr_t>(page_size()) - 1);
  std::lock_guard lock(mu_);
  page_faults_[page] = PageFault{status, times};
}

void FaultInjectingOs::clear() {
  std::lock_guard lock(mu_);
  call_faults_ = {};
  page_faults_.clear();
}

std::uint64_t FaultInjectingOs::calls(OsCall call) const {
  std::lock_guard lock(mu_);
  return calls_[static_cast<int>(call)];
}

std::uint64_t FaultInjectingOs::injected() const {
  std::lock_guard lock(mu_);
  return injected_;
}

int FaultInjectingOs::take(OsCall call, bool moving) {
  std::lock_guard lock(mu_);
  ++calls_[static_cast<int>(call)];
  CallFault& f = call_faults_[static_cast<int>(call)];
  if (f.times <= 0 || (f.moving_only && !moving)) return 0;
  --f.times;
  ++injected_;
  return f.err;
}

int FaultInjectingOs::map(std::size_t bytes, void** out) noexcept {
  if (int err = take(OsCall::map, false)) return err;
  return up_.map(bytes, out);
}

int FaultInjectingOs::reserve(std::size_t bytes, void** out) noexcept {
  if (int err = take(OsCall::reserve, false)) return err;
  return up_.reserve(bytes, out);
}

int FaultInjectingOs::commit(void* addr, std::size_t bytes) noexcept {
  if (int err = take(OsCall::commit, false)) return err;
  return up_.commit(addr, bytes);
}

int FaultInjectingOs::unmap(void* addr, std::size_t bytes) noexcept {
  if (int err = take(OsCall::unmap, false)) return err;
  return up_.unmap(addr, bytes);
}

int FaultInjectingOs::lock(void* addr, std::size_t bytes) noexcept {
  if (int err = take(OsCall::lock, false)) return err;
  return up_.lock(addr, bytes);
}

int FaultInjectingOs::purge(void* addr, std::size_t bytes, bool lazy) noexcept {
  if (int err = take(OsCall::purge, false)) return err;
  return up_.purge(addr, bytes, lazy);
}

int FaultInjectingOs::advise_huge(void* addr, std::size_t bytes, bool huge) noexcept {
  if (int err = take(OsCall::advise_huge, false)) return err;
  return up_.advise_huge(addr, bytes, huge);
}

int FaultInjectingOs::bind(void* addr, std::size_t bytes, int node, BindMode mode, bool move) noexcept {
  if (int err = take(OsCall::bind, move)) return err;
  return up_.bind(addr, bytes, node, mode, move);
}

int FaultInjectingOs::set_policy(void* addr, std::size_t bytes, NodePolicy policy, std::span<const int> nodes) noexcept {
  if (int err = take(OsCall::set_policy, false)) return err;
  return up_.set_policy(addr, bytes, policy, nodes);
}

int FaultInjectingOs::set_thread_policy(NodePolicy policy, std::span<const int> nodes) noexcept {
  if (int err = take(OsCall::set_thread_policy, false)) return err;
  return up_.set_thread_policy(policy, nodes);
}

int FaultInjectingOs::move_pages(std::span<void* const> pages, std::span<const int> nodes,
                                 std::span<int> status) noexcept {
  if (move_hook_) move_hook_();
  if (int err = take(OsCall::move_pages, !nodes.empty())) return err;
  if (nodes.empty()) return up_.move_pages(pages, nodes, status);
  // Pages with an injected status stay where they are; the rest go to the kernel in one call.
  std::vector<void*> fwd_pages;
  std::vector<int> fwd_nodes;
  std::vector<int> fwd_status;
  std::vector<std::size_t> fwd_index;
  try {
    fwd_pages.reserve(pages.size());
    fwd_status.reserve(pages.size());
    fwd_nodes.reserve(pages.size());
    fwd_index.reserve(pages.size());
    std::lock_guard lock(mu_);
    const auto mask = ~(static_cast<std::uintptr_t>(page_size()) - 1);
    for (std::size_t i = 0; i < pages.size(); ++i) {
      auto it = page_faults_.find(reinterpret_cast<std::uintptr_t>(pages[i]) & mask);
      if (it != page_faults_.end() && it->second.times > 0) {
        status[i] = it->second.status;
        if (--it->second.times == 0) page_faults_.erase(it);
        ++injected_;
        continue;
      }
      fwd_pages.push_back(pages[i]);
      fwd_nodes.push_back(nodes[i]);
      fwd_index.push_back(i);
      fwd_status.push_back(0);
    }
  } catch (...) {
    return ENOMEM;
  }
  if (fwd_pages.size() == pages.size()) return up_.move_pages(pages, nodes, status);
  if (int err = up_.move_pages(fwd_pages, fwd_nodes, fwd_status)) return err;
  for (std::size_t k = 0; k < fwd_index.size(); ++k) status[fwd_index[k]] = fwd_status[k];
  return 0;
}

int FaultInjectingOs::policy_of(void* addr, int* mode, int* node) noexcept {
  if (int err = take(OsCall::policy_of, false)) return err;
  return up_.policy_of(addr, mode, node);
}

}  // namespace tierpack::host
