// HandlePool: physical handles of one size on one side (device or host), created on demand up to a
// limit and kept for reuse. Creating handles is slow (host handles ~88 ms per 256 MiB on the H200
// machine), releasing them too, so the GPU tier never returns a handle to the driver on its hot paths.
//
// Every handle the pool creates is also mapped, for its whole life, at a "shadow" address of the
// pool's own reservation. Migrations copy into a handle through its shadow address while the group's
// own address still maps the old handle; see Note [Always-mapped page groups] in vmm_backend.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "alloc/gpu/vmm_backend.hpp"

namespace tierpack::gpu {

struct PooledHandle {
  PhysHandle phys;
  std::uintptr_t shadow = 0;  ///< permanent mapping of `phys` (copy source/destination)
  explicit operator bool() const { return static_cast<bool>(phys); }
};

class HandlePool {
 public:
  /// `capacity`: the most handles this pool can ever hold (sizes its shadow reservation);
  /// `limit`: how many may exist now (the budget), <= capacity.
  HandlePool(VmmBackend& backend, Residence where, std::size_t handle_bytes, std::size_t capacity, std::size_t limit);
  ~HandlePool();
  HandlePool(const HandlePool&) = delete;
  HandlePool& operator=(const HandlePool&) = delete;

  Residence where() const { return where_; }
  std::size_t handle_bytes() const { return bytes_; }

  /// An idle handle, or a newly created one while fewer than limit() exist; empty when the pool is
  /// at its limit or the location is full (last_failure() says which).
  PooledHandle try_acquire();
  /// Gives a handle back for reuse (or releases it when the pool is over its limit).
  void put(PooledHandle h) noexcept;
  /// Creates handles until `n` are idle (or the limit is reached); returns how many are idle.
  std::size_t prewarm(std::size_t n);
  /// Releases idle handles beyond `keep_idle`; returns how many were released.
  std::size_t trim(std::size_t keep_idle) noexcept;
  /// Changes the limit (clamped to the capacity); idle handles over a lower limit are released.
  void set_limit(std::size_t limit) noexcept;

  std::size_t limit() const;
  std::size_t capacity() const { return capacity_; }
  std::size_t owned() const;  ///< handles that exist (idle + in use)
  std::size_t idle() const;
  std::uint64_t owned_bytes() const { return static_cast<std::uint64_t>(owned()) * bytes_; }
  std::string last_failure() const;

 private:
  void destroy(PooledHandle h) noexcept;

  VmmBackend& backend_;
  const Residence where_;
  const std::size_t bytes_;
  const std::size_t capacity_;
  std::uintptr_t shadow_base_ = 0;
  mutable std::mutex mutex_;
  std::size_t limit_ = 0;
  std::size_t owned_ = 0;  // including handles being created right now
  std::vector<PooledHandle> idle_;
  std::vector<std::uint32_t> free_slots_;  // shadow slots given back
  std::size_t next_slot_ = 0;              // slots never used start here
  std::string last_failure_;
};

}  // namespace tierpack::gpu
