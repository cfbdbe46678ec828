// HostOs on Linux with libnuma (TIERPACK_WITH_NUMA=ON): one system call per function.
// See Note [Host OS layer preconditions] in host_os.hpp.
#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "alloc/host/host_os.hpp"

namespace tierpack::host {
namespace {

// The kernel reads maxnode - 1 bits of the mask (a historical off-by-one that libnuma also
// compensates for), so a 1024-node mask is passed as 1025.
constexpr int kMaskWords = 16;
constexpr unsigned long kMaxNode = kMaskWords * 64 + 1;

class LinuxNumaOs final : public HostOs {
 public:
  LinuxNumaOs() {
    page_ = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    nodes_ = numa_available() < 0 ? 1 : numa_max_node() + 1;
  }

  std::size_t page_size() const noexcept override { return page_; }
  int node_count() const noexcept override { return nodes_; }

  int map(std::size_t bytes, void** out) noexcept override {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return errno;
    *out = p;
    return 0;
  }

  int unmap(void* addr, std::size_t bytes) noexcept override {
    return ::munmap(addr, bytes) == 0 ? 0 : errno;
  }

  int purge(void* addr, std::size_t bytes, bool lazy) noexcept override {
    return ::madvise(addr, bytes, lazy ? MADV_FREE : MADV_DONTNEED) == 0 ? 0 : errno;
  }

  int advise_huge(void* addr, std::size_t bytes, bool huge) noexcept override {
    return ::madvise(addr, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) == 0 ? 0 : errno;
  }

  int bind(void* addr, std::size_t bytes, int node, BindMode mode, bool move) noexcept override {
    if (node < 0 || node >= kMaskWords * 64) return EINVAL;
    unsigned long mask[kMaskWords] = {};
    mask[node / 64] = 1UL << (node % 64);
    const int policy = mode == BindMode::strict ? MPOL_BIND : MPOL_PREFERRED;
    const unsigned flags = move ? (MPOL_MF_MOVE | MPOL_MF_STRICT) : 0;
    return ::mbind(addr, bytes, policy, mask, kMaxNode, flags) == 0 ? 0 : errno;
  }

  int move_pages(std::span<void* const> pages, std::span<const int> nodes,
                 std::span<int> status) noexcept override {
    if (status.size() != pages.size() || (!nodes.empty() && nodes.size() != pages.size())) return EINVAL;
    if (pages.empty()) return 0;
    // A positive result is the number of pages left unmigrated; their status says why.
    const long rc = ::move_pages(0, pages.size(), const_cast<void**>(pages.data()),
                                 nodes.empty() ? nullptr : nodes.data(), status.data(), MPOL_MF_MOVE);
    return rc < 0 ? errno : 0;
  }

  int policy_of(void* addr, int* mode, int* node) noexcept override {
    unsigned long mask[kMaskWords] = {};
    int m = 0;
    if (::get_mempolicy(&m, mask, kMaxNode, addr, MPOL_F_ADDR) != 0) return errno;
    *mode = m;
    *node = -1;
    for (int w = 0; w < kMaskWords && *node < 0; ++w) {
      if (mask[w] != 0) *node = w * 64 + __builtin_ctzl(mask[w]);
    }
    return 0;
  }

 private:
  std::size_t page_ = 4096;
  int nodes_ = 1;
};

}  // namespace

// Never destroyed: the session's atexit handler (Note [Process lifetime]) still uses it after the static
// destructors registered later have run (a destroyed one gave "pure virtual method called").
HostOs& system_os() noexcept {
  static LinuxNumaOs* const os = new LinuxNumaOs;
  return *os;
}

}  // namespace tierpack::host
