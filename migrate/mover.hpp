// Mover: what the schedule executor (migrate/schedule_executor.hpp) needs of anything that moves a page
// group's bytes between two tiers, and which mover serves which pair of tier kinds (as Umpire registers
// its copy and move operations by (source, destination)):
//
//   from \ to     gpu                  host_dram            far_memory
//   gpu           -                    gpu::GroupMover      -
//   host_dram     gpu::GroupMover      host::HostMover      host::HostMover
//   far_memory    -                    host::HostMover      host::HostMover
//
// host::HostMover (migrate/host/host_mover.hpp): a group's pages between NUMA nodes (DRAM, CXL / far
// memory) with move_pages or mbind on a worker thread. gpu::GroupMover (migrate/gpu/group_mover.hpp): a
// group's chunks between device and host memory behind VMM remaps, ordered after a stream's work.
// Each keeps its own further API (move_now, remap options, counters of its own kind) for the runtime
// that owns it, its tests and benchmarks.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/plan.hpp"
#include "core/tier.hpp"

namespace tierpack {

/// The stream whose work so far a move is ordered after: a GPU stream (alloc/gpu's StreamHandle, an opaque
/// integer, so no CUDA type reaches the host build). Host movers have no streams and are given 0.
using MoveOrder = std::uintptr_t;

/// How a prefetch stood when the clock needed it (Mover::land).
struct Landing {
  bool waited = false;  ///< the clock waited for it (a stall)
  bool landed = true;   ///< the group is where the prefetch takes it (false: still moving, or given up)
};

class Mover {
 public:
  virtual ~Mover() = default;

  /// Whether the mover can move `group` (the GPU mover: a group bound to its allocator arena).
  virtual bool moves(GroupId group) const = 0;
  /// Starts moving `m.group` to `m.to` (m.kind says which way the bytes count) once the work enqueued
  /// on `order` so far has run; never waits for the move. Returns the request's number among the
  /// group's requests (1, 2, ...: see done()).
  virtual std::uint64_t submit(const Move& m, MoveOrder order) = 0;
  /// Whether `group`'s request number `request` and every one before it are over (moved, given up or
  /// failed).
  virtual bool done(GroupId group, std::uint64_t request) const = 0;
  /// The iteration's clock reached `now`, before the prefetches it needs land. A mover that never waits
  /// counts here the prefetches needed by `now` that are still moving (host::HostMover: late moves); one
  /// that waits in land() has nothing to do.
  virtual void reached(std::int64_t /*now*/) {}
  /// The clock needs `prefetch` now: makes sure it has landed. host::HostMover never waits (a late group
  /// is correct where it is, only slower); gpu::GroupMover waits for it, bounded (ensure_resident).
  virtual Landing land(const Move& prefetch) = 0;
};

/// The movers of the table above.
enum class MoverKind : std::uint8_t {
  none,          ///< no mover moves bytes between these tiers
  host_pages,    ///< host::HostMover
  device_groups  ///< gpu::GroupMover
};
std::string_view to_string(MoverKind kind);

/// Which mover moves bytes from a tier of kind `from` to one of kind `to` (the table above).
MoverKind mover_for(TierKind from, TierKind to);

}  // namespace tierpack
