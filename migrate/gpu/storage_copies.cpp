// The storage mover's batched copies (see storage_copies.hpp).
#include "migrate/gpu/storage_copies.hpp"

#include <string>

#include "core/error.hpp"

namespace tierpack::gpu {

StorageCopies::StorageCopies(VmmBackend& backend) : backend_(backend), fence_(backend.create_event()) {}

StorageCopies::~StorageCopies() { backend_.destroy_event(fence_); }

void StorageCopies::copy(std::optional<StreamHandle> after, StreamHandle copy_stream, std::span<const EventHandle> waits,
                         std::span<const StorageCopy> copies, EventHandle done) {
  for (std::size_t i = 0; i < copies.size(); ++i) {
    if (copies[i].bytes != 0 && (copies[i].dst == 0 || copies[i].src == 0))
      throw logic_error("storage copy " + std::to_string(i) + " of " + std::to_string(copies.size()) + ": " +
                             std::to_string(copies[i].bytes) + " bytes with a null " +
                             (copies[i].dst == 0 ? "destination" : "source"));
  }
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

}  // namespace tierpack::gpu
