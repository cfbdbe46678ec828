// The memfd twin of the CUDA VMM backend (see memfd_backend.hpp).
#include "alloc/gpu/memfd_backend.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "core/units.hpp"
#include "alloc/gpu/chunk_checksum.hpp"

namespace tierpack::gpu {

// A stream is a thread that runs its work in order. `enqueued` and `completed` count work items; an
// event remembers (stream, enqueued-at-record) and is complete once `completed` reaches it.
struct MemfdBackend::Stream {
  std::mutex m;
  std::condition_variable cv;  // new work, completion, stop
  std::deque<std::function<void()>> work;
  std::uint64_t enqueued = 0;
  std::uint64_t completed = 0;
  bool stop = false;
  std::string error;  // first failure of a work item (sticky, like a CUDA context error)
  std::thread thread;

  Stream() : thread([this] { run(); }) {}
  ~Stream() {
    {
      std::lock_guard lk(m);
      stop = true;
    }
    cv.notify_all();
    thread.join();
  }

  void run() {
    std::unique_lock lk(m);
    for (;;) {
      cv.wait(lk, [&] { return stop || !work.empty(); });
      if (work.empty()) return;
      auto task = std::move(work.front());
      work.pop_front();
      lk.unlock();
      std::string failure;
      try {
        task();
      } catch (const std::exception& e) {
        failure = e.what();
      }
      lk.lock();
      if (!failure.empty() && error.empty()) error = failure;
      ++completed;
      cv.notify_all();
    }
  }

  std::uint64_t push(std::function<void()> f) {
    std::lock_guard lk(m);
    work.push_back(std::move(f));
    ++enqueued;
    cv.notify_all();
    return enqueued;
  }

  std::uint64_t position() {
    std::lock_guard lk(m);
    return enqueued;
  }

  bool reached(std::uint64_t target) {
    std::lock_guard lk(m);
    return completed >= target;
  }

  void wait_for(std::uint64_t target) {
    std::unique_lock lk(m);
    cv.wait(lk, [&] { return completed >= target; });
    if (!error.empty()) throw logic_error("twin stream work failed: " + error);
  }
};

struct MemfdBackend::Event {
  std::mutex m;
  Stream* stream = nullptr;
  std::uint64_t target = 0;

  std::pair<Stream*, std::uint64_t> captured() {
    std::lock_guard lk(m);
    return {stream, target};
  }
};

MemfdBackend::MemfdBackend(TwinOptions options) : options_(std::move(options)) {
  TIERPACK_EXPECTS(options_.granularity >= 4096 && options_.granularity % 4096 == 0,
                   "twin granularity must be a multiple of 4 KiB");
  info_.name = "memfd-twin";
  info_.device_name = "twin";
  info_.granularity = options_.granularity;
  info_.device_bytes = options_.device_bytes;
  default_stream_ = std::make_unique<Stream>();
}

MemfdBackend::~MemfdBackend() {
  streams_.clear();
  default_stream_.reset();
}

void MemfdBackend::check_in_reservation(std::uintptr_t va, std::size_t bytes) const {
  auto it = reservations_.upper_bound(va);
  if (it == reservations_.begin()) throw logic_error("twin: address outside every reservation");
  --it;
  if (va + bytes > it->first + it->second) throw logic_error("twin: range crosses the end of its reservation");
}

std::uintptr_t MemfdBackend::reserve(std::size_t bytes) {
  TIERPACK_EXPECTS(bytes > 0 && bytes % options_.granularity == 0, "reservation must be a multiple of the granularity");
  // Over-reserve by one granule and trim, so the range is aligned like cuMemAddressReserve's.
  const std::size_t g = options_.granularity;
  void* p = ::mmap(nullptr, bytes + g, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw os_error("mmap(PROT_NONE reservation)", errno);
  const auto raw = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t va = (raw + g - 1) / g * g;
  if (va > raw) ::munmap(p, va - raw);
  if (raw + g > va) ::munmap(reinterpret_cast<void*>(va + bytes), raw + g - va);
  std::lock_guard lk(mutex_);
  reservations_[va] = bytes;
  return va;
}

void MemfdBackend::unreserve(std::uintptr_t va, std::size_t bytes) noexcept {
  {
    std::lock_guard lk(mutex_);
    reservations_.erase(va);
    for (auto it = mapped_.lower_bound(va); it != mapped_.end() && it->first < va + bytes;) it = mapped_.erase(it);
  }
  ::munmap(reinterpret_cast<void*>(va), bytes);
}

PhysHandle MemfdBackend::create(Residence where, std::size_t bytes) {
  TIERPACK_EXPECTS(bytes > 0 && bytes % options_.granularity == 0, "handle size must be a multiple of the granularity");
  const int w = static_cast<int>(where);
  const std::uint64_t cap = where == Residence::device ? options_.device_bytes : options_.host_bytes;
  {
    std::lock_guard lk(mutex_);
    if ((options_.fail_create && options_.fail_create(where, bytes)) || created_[w] + bytes > cap)
      throw out_of_memory(bytes, where == Residence::device ? "twin device" : "twin host",
                          cap > created_[w] ? cap - created_[w] : 0, "memfd twin capacity");
    created_[w] += bytes;
  }
  const int fd = ::memfd_create("tierpack-twin", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    std::lock_guard lk(mutex_);
    created_[w] -= bytes;
    throw os_error(fd < 0 ? "memfd_create" : "ftruncate", err);
  }
  return PhysHandle{static_cast<std::uint64_t>(fd), bytes, where};
}

void MemfdBackend::release(PhysHandle h) noexcept {
  if (!h) return;
  ::close(static_cast<int>(h.value));  // mappings keep the memory alive, as cuMemRelease does
  std::lock_guard lk(mutex_);
  created_[static_cast<int>(h.where)] -= h.bytes;
}

void MemfdBackend::map(std::uintptr_t va, PhysHandle h) {
  TIERPACK_EXPECTS(h && va % options_.granularity == 0, "map needs a handle and an aligned address");
  std::unique_lock mapping(mapping_);
  {
    std::lock_guard lk(mutex_);
    check_in_reservation(va, h.bytes);
    auto next = mapped_.lower_bound(va);
    if (next != mapped_.end() && next->first < va + h.bytes) throw logic_error("twin: map over a mapped range");
    if (next != mapped_.begin() && std::prev(next)->first + std::prev(next)->second > va)
      throw logic_error("twin: map over a mapped range");
    mapped_[va] = h.bytes;
  }
  void* p = ::mmap(reinterpret_cast<void*>(va), h.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                   static_cast<int>(h.value), 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    std::lock_guard lk(mutex_);
    mapped_.erase(va);
    throw os_error("mmap(MAP_FIXED memfd)", err);
  }
}

void MemfdBackend::unmap(std::uintptr_t va, std::size_t bytes) {
  std::unique_lock mapping(mapping_);
  {
    std::lock_guard lk(mutex_);
    auto it = mapped_.find(va);
    if (it == mapped_.end() || it->second != bytes) throw logic_error("twin: unmap of a range that is not one mapping");
    mapped_.erase(it);
  }
  void* p = ::mmap(reinterpret_cast<void*>(va), bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                   -1, 0);
  if (p == MAP_FAILED) throw os_error("mmap(PROT_NONE over unmapped chunk)", errno);
}

MemfdBackend::Stream& MemfdBackend::stream(StreamHandle s) {
  if (s == 0) return *default_stream_;
  std::lock_guard lk(mutex_);
  auto it = streams_.find(s);
  TIERPACK_EXPECTS(it != streams_.end(), "twin: unknown stream");
  return *it->second;
}

StreamHandle MemfdBackend::create_stream() {
  auto s = std::make_unique<Stream>();
  const auto h = reinterpret_cast<StreamHandle>(s.get());
  std::lock_guard lk(mutex_);
  streams_[h] = std::move(s);
  return h;
}

void MemfdBackend::destroy_stream(StreamHandle s) noexcept {
  std::unique_ptr<Stream> victim;
  {
    std::lock_guard lk(mutex_);
    auto it = streams_.find(s);
    if (it == streams_.end()) return;
    victim = std::move(it->second);
    streams_.erase(it);
  }
  victim.reset();  // drains its work, then joins
}

EventHandle MemfdBackend::create_event() { return reinterpret_cast<EventHandle>(new Event); }
void MemfdBackend::destroy_event(EventHandle e) noexcept { delete reinterpret_cast<Event*>(e); }

void MemfdBackend::record(EventHandle e, StreamHandle s) {
  Stream& st = stream(s);
  auto* ev = reinterpret_cast<Event*>(e);
  std::lock_guard lk(ev->m);
  ev->stream = &st;
  ev->target = st.position();
}

bool MemfdBackend::query(EventHandle e) {
  auto [st, target] = reinterpret_cast<Event*>(e)->captured();
  return st == nullptr || st->reached(target);
}

void MemfdBackend::synchronize(EventHandle e) {
  auto [st, target] = reinterpret_cast<Event*>(e)->captured();
  if (st) st->wait_for(target);
}

void MemfdBackend::wait(StreamHandle s, EventHandle e) {
  auto [st, target] = reinterpret_cast<Event*>(e)->captured();
  if (!st) return;
  stream(s).push([st = st, target = target] { st->wait_for(target); });
}

void MemfdBackend::synchronize_stream(StreamHandle s) {
  Stream& st = stream(s);
  st.wait_for(st.position());
}

void MemfdBackend::copy_async(std::uintptr_t dst, std::uintptr_t src, std::size_t bytes, StreamHandle s) {
  stream(s).push([dst, src, bytes, delay = options_.copy_delay] {
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  });
}

// A kernel reading the range: like device_access, an unmapped byte is an illegal address.
void MemfdBackend::checksum_async(std::uintptr_t va, std::size_t bytes, std::size_t stride, std::uint64_t* out,
                                  StreamHandle s) {
  stream(s).push([this, va, bytes, stride, out] {
    device_access(va, bytes, [&](void* p) {
      out[0] = checksum_bytes(p, bytes, stride);
      for (std::size_t i = 1; i < kChecksumWords; ++i) out[i] = 0;
    });
  });
}

std::uint64_t* MemfdBackend::host_words(std::size_t n) {
  std::lock_guard lk(mutex_);
  words_.push_back(std::make_unique<std::uint64_t[]>(n));
  return words_.back().get();
}

// A gate is a work item that says it started (everything before it on the stream has completed)
// and blocks its stream until opened.
struct MemfdBackend::Gate {
  std::mutex m;
  std::condition_variable cv;
  bool reached = false;
  bool open = false;
};

GateHandle MemfdBackend::close_gate(StreamHandle s) {
  auto g = std::make_shared<Gate>();
  Stream& st = stream(s);
  {
    std::lock_guard lk(mutex_);
    gates_[reinterpret_cast<GateHandle>(g.get())] = g;
  }
  st.push([g] {
    std::unique_lock lk(g->m);
    g->reached = true;
    g->cv.wait(lk, [&] { return g->open; });
  });
  return reinterpret_cast<GateHandle>(g.get());
}

bool MemfdBackend::gate_reached(GateHandle h) {
  auto* g = reinterpret_cast<Gate*>(h);
  std::lock_guard lk(g->m);
  return g->reached;
}

void MemfdBackend::open_gate(GateHandle h) noexcept {
  std::shared_ptr<Gate> g;
  {
    std::lock_guard lk(mutex_);
    auto it = gates_.find(h);
    if (it == gates_.end()) return;
    g = std::move(it->second);
    gates_.erase(it);
  }
  {
    std::lock_guard lk(g->m);
    g->open = true;
  }
  g->cv.notify_all();
}

void MemfdBackend::device_access(std::uintptr_t va, std::size_t bytes, const std::function<void(void*)>& access) {
  std::shared_lock mapping(mapping_);
  {
    std::lock_guard lk(mutex_);
    std::uintptr_t at = va;
    auto it = mapped_.upper_bound(va);
    if (it != mapped_.begin()) --it;
    while (at < va + bytes && it != mapped_.end() && it->first <= at && it->first + it->second > at) {
      at = it->first + it->second;
      ++it;
    }
    if (at < va + bytes) {
      ++illegal_;
      throw logic_error("twin: illegal address: a kernel touched an unmapped chunk");
    }
  }
  access(reinterpret_cast<void*>(va));
}

std::uint64_t MemfdBackend::illegal_accesses() const { return illegal_.load(); }

void MemfdBackend::read(void* dst, std::uintptr_t src, std::size_t bytes) {
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
}

void MemfdBackend::write(std::uintptr_t dst, const void* src, std::size_t bytes) {
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
}

void MemfdBackend::enqueue(StreamHandle s, std::function<void()> work) { stream(s).push(std::move(work)); }

std::uint64_t MemfdBackend::created_bytes(Residence where) const {
  std::lock_guard lk(mutex_);
  return created_[static_cast<int>(where)];
}

}  // namespace tierpack::gpu
