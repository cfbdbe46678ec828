// What the real-nodes experiment needs of the machine: anonymous mappings with a NUMA policy (preferred,
// bind, interleave over a node set), a "balloon" that pins a node's free memory down to a budget,
// per-page node residency (move_pages status), and the kernel's counters (/proc/vmstat, node meminfo).
// The system calls go through the OS layer (platform/host_os.hpp); this file adds the experiment's
// conventions on top. Return values follow the kernel: 0 or -errno; nothing here throws except
// Balloon's constructor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "platform/host_os.hpp"

namespace tierpack::experiment {

using NodePolicy = host::NodePolicy;

/// set_mempolicy for the calling thread, which threads started later inherit (interleave over
/// `nodes`, or back to the default with local). Returns 0 or -errno.
int set_process_policy(NodePolicy policy, const std::vector<int>& nodes);

/// mmap of `bytes` with the policy applied before any page is touched; nullptr on failure.
void* map_with_policy(std::size_t bytes, NodePolicy policy, const std::vector<int>& nodes);
void unmap(void* p, std::size_t bytes) noexcept;

/// Free bytes on `node` (MemFree of /sys/devices/system/node/nodeN/meminfo), 0 when unreadable.
std::uint64_t node_free_bytes(int node);
/// The kernel's low watermark for `node`'s zones in bytes (/proc/zoneinfo): below it, allocations fall back.
std::uint64_t node_low_watermark_bytes(int node);
/// Number of NUMA nodes with memory (from /sys/devices/system/node/has_memory ranges; 1 when unknown).
std::vector<int> memory_nodes();

/// /proc/vmstat as name -> value (empty when unreadable).
std::map<std::string, std::uint64_t> read_vmstat();

/// Bytes of the pages of [p, p+n) found on each node (move_pages status); untouched pages are not counted.
void add_residency(const void* p, std::size_t n, std::map<int, std::uint64_t>& bytes_per_node);

/// Pins `node`'s free memory down to about `leave` bytes for its lifetime: mlock'ed mappings bound to
/// the node (MPOL_PREFERRED, so a mis-sized part never OOM-kills), so neither reclaim nor demotion can
/// take them back. Where allocations start falling back
/// to another node depends on the kernel's watermarks, so the size is calibrated: a probe touches
/// pages (local policy) until one lands elsewhere, and the balloon grows or shrinks by the difference
/// between what fitted and `leave` (a few rounds). room() is what the last probe found.
class Balloon {
 public:
  Balloon(int node, std::uint64_t leave);
  ~Balloon();
  Balloon(const Balloon&) = delete;
  Balloon& operator=(const Balloon&) = delete;
  std::uint64_t bytes() const;
  std::uint64_t room() const { return room_; }
  /// Whether the last probe found the room within tolerance (max(256 KiB, leave/10)) of `leave`.
  bool converged() const { return converged_; }

 private:
  bool add(std::uint64_t bytes);
  std::uint64_t probe() const;
  int node_;
  std::vector<std::pair<void*, std::uint64_t>> parts_;
  std::uint64_t room_ = 0;
  bool converged_ = false;
};

}  // namespace tierpack::experiment
