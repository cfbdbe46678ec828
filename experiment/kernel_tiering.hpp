// The kernel's own tiering, as experiment policies on real nodes:
//   kernel-tiering  NUMA balancing in memory-tiering mode (numa_balancing=2: hot pages on the slow
//                   tier are promoted from hint faults) plus demotion on reclaim (demotion_enabled)
//   damon           DAMON on physical addresses with two schemes: migrate_hot to the fast node and
//                   migrate_cold to the slow node (Linux 6.11+ sysfs interface)
// Both are detected in /proc and /sys; a session applies the settings and restores them on exit.
// Needs root (the QEMU guest runs as root); anything missing is reported as "not available: why".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tierpack::experiment {

struct KernelFeature {
  bool available = false;
  std::string reason;  ///< why not (or what was found)
};

KernelFeature detect_kernel_tiering();
KernelFeature detect_damon_migrate();

/// numa_balancing=2 and demotion_enabled=true while alive; the previous values afterwards.
class KernelTieringSession {
 public:
  KernelTieringSession();  ///< throws os_error when a setting cannot be written
  ~KernelTieringSession();
  KernelTieringSession(const KernelTieringSession&) = delete;
  KernelTieringSession& operator=(const KernelTieringSession&) = delete;

 private:
  std::string old_balancing_, old_demotion_;
};

/// One kdamond on physical addresses with migrate_hot -> fast_node and migrate_cold -> slow_node.
class DamonSession {
 public:
  DamonSession(int fast_node, int slow_node);  ///< throws os_error naming the sysfs file that failed
  ~DamonSession();
  DamonSession(const DamonSession&) = delete;
  DamonSession& operator=(const DamonSession&) = delete;
  /// Bytes DAMON's schemes applied their action to so far (sum of the schemes' stats/sz_applied).
  std::uint64_t applied_bytes(int scheme) const;
  /// "tried N regions (B bytes), applied M (B bytes)" of one scheme, for the notes.
  std::string stats(int scheme) const;
};

}  // namespace tierpack::experiment
