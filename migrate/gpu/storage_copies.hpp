// StorageCopies: the storage mover's copies (python/tierpack/copy_streams.py, Note [Raw copies]) as one call per
// batch: whole-storage copies queued on a copy stream after the work queued so far on another stream and after
// given events, with one event recorded after them. Through torch's Python API each copy costs the host a stream
// switch, a copy dispatch, an event and its record; here a batch is one call into the backend's thin layer. Every
// call leaves the calling thread's current context as it found it (Note [The caller's context] in the .cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>

#include "alloc/gpu/vmm_backend.hpp"

namespace tierpack::gpu {

struct StorageCopy {
  std::uintptr_t dst = 0;
  std::uintptr_t src = 0;
  std::size_t bytes = 0;
};

class StorageCopies {
 public:
  explicit StorageCopies(VmmBackend& backend);
  ~StorageCopies();
  StorageCopies(const StorageCopies&) = delete;
  StorageCopies& operator=(const StorageCopies&) = delete;

  /// Queues `copies` in order on `copy_stream`, after the work queued so far on `after` (none: no such wait; 0 is
  /// CUDA's default stream) and after every event of `waits` (0 entries skipped), then records `done` (0: none) on
  /// `copy_stream`. A copy of 0 bytes is skipped; one with a null address throws logic_error before anything is
  /// queued. Thread-safe.
  void copy(std::optional<StreamHandle> after, StreamHandle copy_stream, std::span<const EventHandle> waits,
            std::span<const StorageCopy> copies, EventHandle done);

  EventHandle new_event();
  void free_event(EventHandle e) noexcept;
  /// Whether the work `e` was recorded after has run (an event never recorded counts as done).
  bool done(EventHandle e);
  /// `s` waits on the device (not the host) for what `e` was recorded after.
  void wait(StreamHandle s, EventHandle e);
  /// The host waits for `e`: for tests and shutdown, never on the hooks' path.
  void synchronize(EventHandle e);

 private:
  VmmBackend& backend_;
  std::mutex m_;  // the fence is recorded and waited on as one step (a wait takes the record made before it)
  EventHandle fence_ = 0;
};

}  // namespace tierpack::gpu
