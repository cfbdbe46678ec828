// HostOs on Linux with libnuma (TIERPACK_WITH_NUMA=ON): the node calls, one system call per function;
// mappings and madvise come from PosixHostOs. See Note [Host OS layer preconditions] in host_os.hpp.
#include <numa.h>
#include <numaif.h>

#include <cerrno>

#include "platform/detail/posix_host_os.hpp"

namespace tierpack::host {
namespace {

// The kernel reads maxnode - 1 bits of the mask (a historical off-by-one that libnuma also
// compensates for), so a 1024-node mask is passed as 1025.
constexpr int kMaskWords = 16;
constexpr unsigned long kMaxNode = kMaskWords * 64 + 1;

struct NodeMask {
  unsigned long words[kMaskWords] = {};
};

/// The mask of `nodes`; false when one is outside it.
bool to_mask(std::span<const int> nodes, NodeMask& mask) noexcept {
  for (int n : nodes) {
    if (n < 0 || n >= kMaskWords * 64) return false;
    mask.words[n / 64] |= 1UL << (n % 64);
  }
  return true;
}

int mpol_mode(NodePolicy policy) noexcept {
  switch (policy) {
    case NodePolicy::preferred: return MPOL_PREFERRED;
    case NodePolicy::bind: return MPOL_BIND;
    case NodePolicy::interleave: return MPOL_INTERLEAVE;
    case NodePolicy::local: break;
  }
  return MPOL_DEFAULT;
}

class LinuxNumaOs final : public detail::PosixHostOs {
 public:
  LinuxNumaOs() { nodes_ = numa_available() < 0 ? 1 : numa_max_node() + 1; }

  int node_count() const noexcept override { return nodes_; }

  int bind(void* addr, std::size_t bytes, int node, BindMode mode, bool move) noexcept override {
    NodeMask mask;
    if (!to_mask(std::span<const int>(&node, 1), mask)) return EINVAL;
    const int policy = mode == BindMode::strict ? MPOL_BIND : MPOL_PREFERRED;
    const unsigned flags = move ? (MPOL_MF_MOVE | MPOL_MF_STRICT) : 0;
    return ::mbind(addr, bytes, policy, mask.words, kMaxNode, flags) == 0 ? 0 : errno;
  }

  int set_policy(void* addr, std::size_t bytes, NodePolicy policy, std::span<const int> nodes) noexcept override {
    NodeMask mask;
    if (policy == NodePolicy::local) return ::mbind(addr, bytes, MPOL_DEFAULT, nullptr, 0, 0) == 0 ? 0 : errno;
    if (!to_mask(nodes, mask)) return EINVAL;
    return ::mbind(addr, bytes, mpol_mode(policy), mask.words, kMaxNode, 0) == 0 ? 0 : errno;
  }

  int set_thread_policy(NodePolicy policy, std::span<const int> nodes) noexcept override {
    NodeMask mask;
    if (policy == NodePolicy::local) return ::set_mempolicy(MPOL_DEFAULT, nullptr, 0) == 0 ? 0 : errno;
    if (!to_mask(nodes, mask)) return EINVAL;
    return ::set_mempolicy(mpol_mode(policy), mask.words, kMaxNode) == 0 ? 0 : errno;
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
    NodeMask mask;
    int m = 0;
    if (::get_mempolicy(&m, mask.words, kMaxNode, addr, MPOL_F_ADDR) != 0) return errno;
    *mode = m;
    *node = -1;
    for (int w = 0; w < kMaskWords && *node < 0; ++w) {
      if (mask.words[w] != 0) *node = w * 64 + __builtin_ctzl(mask.words[w]);
    }
    return 0;
  }

 private:
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
