// Helpers shared by the OS layer's tests (tests/platform/host_os*_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>

#include "platform/host_os.hpp"

namespace tierpack::host::test {

// The kernel's policy modes (uapi/linux/mempolicy.h) as policy_of and get_mempolicy report them.
inline constexpr int kMpolDefault = 0, kMpolPreferred = 1, kMpolBind = 2, kMpolInterleave = 3;

/// An address range that was mapped and is not any more.
inline void* unmapped_range(HostOs& os, std::size_t bytes) {
  void* p = nullptr;
  EXPECT_EQ(os.map(bytes, &p), 0);
  EXPECT_EQ(os.unmap(p, bytes), 0);
  return p;
}

/// `pages` pages mapped through system_os() for one test, unmapped at its end.
struct Mapped {
  explicit Mapped(std::size_t pages) : page(system_os().page_size()), bytes(pages * page) {
    EXPECT_EQ(system_os().map(bytes, &p), 0);
  }
  ~Mapped() {
    if (p != nullptr) system_os().unmap(p, bytes);
  }
  Mapped(const Mapped&) = delete;
  Mapped& operator=(const Mapped&) = delete;
  void* at(std::size_t i) const { return static_cast<char*>(p) + i * page; }

  std::size_t page;
  std::size_t bytes;
  void* p = nullptr;
};

}  // namespace tierpack::host::test
