// The storage mover's batched copies (see storage_copies.hpp).
#include "migrate/gpu/storage_copies.hpp"

#include <string>

#include "core/error.hpp"

namespace tierpack::gpu {
namespace {

// Note [The caller's context]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The CUDA backend makes its device's primary context current on the calling thread before each call. The storage
// mover calls from torch's threads: a model on cuda:1 driven from a thread whose current device is 0 would find its
// thread's device changed under it (a later torch.empty(device="cuda") landing on device 1), where torch's own copies
// restore the device with a guard. So every call puts the thread's context back when it found one.
class KeepContext {
 public:
  explicit KeepContext(VmmBackend& backend) : backend_(backend), ctx_(backend.current_context()) {}
  ~KeepContext() {
    if (ctx_ == 0) return;
    try {
      if (backend_.current_context() != ctx_) backend_.set_current_context(ctx_);
    } catch (...) {
      // the context of a thread that no longer has it (its device reset): nothing to give back
    }
  }
  KeepContext(const KeepContext&) = delete;
  KeepContext& operator=(const KeepContext&) = delete;

 private:
  VmmBackend& backend_;
  std::uintptr_t ctx_;
};

}  // namespace

StorageCopies::StorageCopies(VmmBackend& backend) : backend_(backend) {
  KeepContext keep(backend_);
  fence_ = backend_.create_event();
}

StorageCopies::~StorageCopies() {
  KeepContext keep(backend_);
  backend_.destroy_event(fence_);
}

void StorageCopies::copy(std::optional<StreamHandle> after, StreamHandle copy_stream, std::span<const EventHandle> waits,
                         std::span<const StorageCopy> copies, EventHandle done) {
  for (std::size_t i = 0; i < copies.size(); ++i) {
    if (copies[i].bytes != 0 && (copies[i].dst == 0 || copies[i].src == 0))
      throw logic_error("storage copy " + std::to_string(i) + " of " + std::to_string(copies.size()) + ": " +
                             std::to_string(copies[i].bytes) + " bytes with a null " +
                             (copies[i].dst == 0 ? "destination" : "source"));
  }
  KeepContext keep(backend_);
  if (after && *after != copy_stream) {
    std::lock_guard lk(m_);
    backend_.record(fence_, *after);
    backend_.wait(copy_stream, fence_);
  }
  for (EventHandle e : waits)
    if (e != 0) backend_.wait(copy_stream, e);
  for (const StorageCopy& c : copies)
    if (c.bytes != 0) backend_.copy_async(c.dst, c.src, c.bytes, copy_stream);
  if (done != 0) backend_.record(done, copy_stream);
}

EventHandle StorageCopies::new_event() {
  KeepContext keep(backend_);
  return backend_.create_event();
}

void StorageCopies::free_event(EventHandle e) noexcept {
  KeepContext keep(backend_);
  backend_.destroy_event(e);
}

bool StorageCopies::done(EventHandle e) {
  KeepContext keep(backend_);
  return backend_.query(e);
}

void StorageCopies::wait(StreamHandle s, EventHandle e) {
  KeepContext keep(backend_);
  backend_.wait(s, e);
}

void StorageCopies::synchronize(EventHandle e) {
  KeepContext keep(backend_);
  backend_.synchronize(e);
}

}  // namespace tierpack::gpu
