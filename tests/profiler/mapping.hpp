// Test helper: an anonymous private mapping of whole pages, unmapped on destruction.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "profiler/detail/page_tracer_backends.hpp"

namespace tierpack::test {

class Mapping {
 public:
  explicit Mapping(std::size_t pages, int prot = PROT_READ | PROT_WRITE)
      : page_(detail::host_page_size()), bytes_(pages * page_) {
    void* p = ::mmap(nullptr, bytes_, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    base_ = static_cast<char*>(p);
    // Keep one page per 4 KiB: a transparent huge page would make "the pages touched" 2 MiB runs.
    ::madvise(base_, bytes_, MADV_NOHUGEPAGE);
  }
  ~Mapping() { ::munmap(base_, bytes_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  char* base() const { return base_; }
  std::size_t bytes() const { return bytes_; }
  std::size_t pages() const { return bytes_ / page_; }
  std::size_t page_size() const { return page_; }
  char* page(std::size_t i) const { return base_ + i * page_; }
  std::uintptr_t addr(std::size_t i) const { return reinterpret_cast<std::uintptr_t>(page(i)); }
  std::size_t index_of(std::uintptr_t a) const { return (a - reinterpret_cast<std::uintptr_t>(base_)) / page_; }

  // Relaxed atomic accesses: tests touch one page from several threads on purpose.
  void write(std::size_t i, char v = 1) const { std::atomic_ref<char>(*(page(i) + 7)).store(v, std::memory_order_relaxed); }
  char read(std::size_t i) const { return std::atomic_ref<char>(*(page(i) + 7)).load(std::memory_order_relaxed); }

 private:
  std::size_t page_;
  std::size_t bytes_;
  char* base_ = nullptr;
};

}  // namespace tierpack::test
