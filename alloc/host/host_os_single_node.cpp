// HostOs for builds without libnuma (TIERPACK_WITH_NUMA=OFF): one node (0), mappings and madvise
// as usual, binding to node 0 accepted as a no-op, any other node refused with EINVAL.
// See Note [Host OS layer preconditions] in host_os.hpp.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "alloc/host/host_os.hpp"

namespace tierpack::host {
namespace {

class SingleNodeOs final : public HostOs {
 public:
  std::size_t page_size() const noexcept override { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }
  int node_count() const noexcept override { return 1; }

  int map(std::size_t bytes, void** out) noexcept override {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return errno;
    *out = p;
    return 0;
  }
  int unmap(void* addr, std::size_t bytes) noexcept override { return ::munmap(addr, bytes) == 0 ? 0 : errno; }
  int purge(void* addr, std::size_t bytes, bool lazy) noexcept override {
    return ::madvise(addr, bytes, lazy ? MADV_FREE : MADV_DONTNEED) == 0 ? 0 : errno;
  }
  int advise_huge(void* addr, std::size_t bytes, bool huge) noexcept override {
    return ::madvise(addr, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) == 0 ? 0 : errno;
  }
  int bind(void*, std::size_t, int node, BindMode, bool) noexcept override { return node == 0 ? 0 : EINVAL; }
  int move_pages(std::span<void* const> pages, std::span<const int> nodes, std::span<int> status) noexcept override {
    if (status.size() != pages.size() || (!nodes.empty() && nodes.size() != pages.size())) return EINVAL;
    for (std::size_t i = 0; i < pages.size(); ++i) status[i] = nodes.empty() || nodes[i] == 0 ? 0 : -EINVAL;
    return 0;
  }
  int policy_of(void*, int* mode, int* node) noexcept override {
    *mode = 0;
    *node = -1;
    return 0;
  }
};

}  // namespace

// Never destroyed: the session's atexit handler (Note [Process lifetime]) still uses it after the static
// destructors registered later have run (a destroyed one gave "pure virtual method called").
HostOs& system_os() noexcept {
  static SingleNodeOs* const os = new SingleNodeOs;
  return *os;
}

}  // namespace tierpack::host
