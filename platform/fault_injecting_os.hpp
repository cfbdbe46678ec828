// FaultInjectingOs: a HostOs adaptor (after RMM's failure_callback_resource_adaptor) that makes
// chosen calls fail with a chosen errno, or chosen pages report a chosen move_pages status, and
// forwards everything else to the wrapped HostOs. Tests use it to show that the allocator and the
// mover fall back (data stays where it is), count the event, and never lose data.
#pragma once

#include <array>
#include <functional>
#include <cstdint>
#include <map>
#include <mutex>

#include "platform/host_os.hpp"

namespace tierpack::host {

/// One per HostOs call that can fail.
enum class OsCall : unsigned char {
  map, reserve, commit, unmap, lock, purge, advise_huge, bind, set_policy, set_thread_policy, move_pages, policy_of
};
inline constexpr int kOsCallCount = static_cast<int>(OsCall::policy_of) + 1;

class FaultInjectingOs final : public HostOs {
 public:
  explicit FaultInjectingOs(HostOs& upstream) : up_(upstream) {}

  /// The next `times` calls of `call` fail with `err` without reaching the kernel.
  /// For bind, only calls that move pages (move = true) are failed when `moving_only`.
  void fail_next(OsCall call, int err, int times = 1, bool moving_only = false);
  /// The next `times` move_pages calls that try to move the page holding `addr` leave it where it
  /// is and report `status` (a negative errno: -EBUSY, -EACCES, -ENOENT, ...) for it.
  void fail_page(const void* addr, int status, int times = 1);
  /// Removes every pending injection.
  void clear();
  /// Runs `hook` at the start of every move_pages call (tests use it to hold a mover mid-move).
  /// Set it before the calls start; it runs on the calling thread without the adaptor's lock.
  void on_move_pages(std::function<void()> hook) { move_hook_ = std::move(hook); }

  /// How many calls of each kind reached this adaptor, and how many failures it injected.
  std::uint64_t calls(OsCall call) const;
  std::uint64_t injected() const;

  std::size_t page_size() const noexcept override { return up_.page_size(); }
  int node_count() const noexcept override { return up_.node_count(); }
  int map(std::size_t bytes, void** out) noexcept override;
  int reserve(std::size_t bytes, void** out) noexcept override;
  int commit(void* addr, std::size_t bytes) noexcept override;
  int unmap(void* addr, std::size_t bytes) noexcept override;
  int lock(void* addr, std::size_t bytes) noexcept override;
  int purge(void* addr, std::size_t bytes, bool lazy) noexcept override;
  int advise_huge(void* addr, std::size_t bytes, bool huge) noexcept override;
  int bind(void* addr, std::size_t bytes, int node, BindMode mode, bool move) noexcept override;
  int set_policy(void* addr, std::size_t bytes, NodePolicy policy, std::span<const int> nodes) noexcept override;
  int set_thread_policy(NodePolicy policy, std::span<const int> nodes) noexcept override;
  int move_pages(std::span<void* const> pages, std::span<const int> nodes, std::span<int> status) noexcept override;
  int policy_of(void* addr, int* mode, int* node) noexcept override;

 private:
  struct CallFault {
    int err = 0;
    int times = 0;
    bool moving_only = false;
  };
  struct PageFault {
    int status = 0;
    int times = 0;
  };
  /// Counts the call; returns the errno to inject (0: forward to the kernel).
  int take(OsCall call, bool moving);

  HostOs& up_;
  mutable std::mutex mu_;
  std::array<CallFault, kOsCallCount> call_faults_{};
  std::array<std::uint64_t, kOsCallCount> calls_{};
  std::map<std::uintptr_t, PageFault> page_faults_;  // keyed by page address
  std::uint64_t injected_ = 0;
  std::function<void()> move_hook_;
};

}  // namespace tierpack::host
