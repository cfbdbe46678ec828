// HostOs for builds without libnuma (TIERPACK_WITH_NUMA=OFF): one node (0). Mappings and madvise as
// usual (PosixHostOs); policies naming only node 0 are accepted as no-ops, any other node is refused
// with EINVAL; move_pages moves nothing (every page is on node 0) but a query still asks the kernel,
// so untouched and unmapped pages read -ENOENT / -EFAULT as on a NUMA build.
// See Note [Host OS layer preconditions] in host_os.hpp.
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "platform/detail/posix_host_os.hpp"

namespace tierpack::host {
namespace {

/// Whether a policy over `nodes` is one this one-node OS can honour (as the kernel would: bind and
/// interleave need a node, preferred without one means local).
bool node_zero_only(NodePolicy policy, std::span<const int> nodes) noexcept {
  if (policy == NodePolicy::local) return true;
  if (nodes.empty()) return policy == NodePolicy::preferred;
  return std::all_of(nodes.begin(), nodes.end(), [](int n) { return n == 0; });
}

class SingleNodeOs final : public detail::PosixHostOs {
 public:
  int node_count() const noexcept override { return 1; }

  int bind(void*, std::size_t, int node, BindMode, bool) noexcept override { return node == 0 ? 0 : EINVAL; }
  int set_policy(void*, std::size_t, NodePolicy policy, std::span<const int> nodes) noexcept override {
    return node_zero_only(policy, nodes) ? 0 : EINVAL;
  }
  int set_thread_policy(NodePolicy policy, std::span<const int> nodes) noexcept override {
    return node_zero_only(policy, nodes) ? 0 : EINVAL;
  }
  int move_pages(std::span<void* const> pages, std::span<const int> nodes, std::span<int> status) noexcept override {
    if (status.size() != pages.size() || (!nodes.empty() && nodes.size() != pages.size())) return EINVAL;
    if (pages.empty()) return 0;
    // The system call needs no libnuma; a kernel without NUMA (ENOSYS) has every page on node 0.
    if (nodes.empty() && ::syscall(SYS_move_pages, 0, pages.size(), pages.data(), nullptr, status.data(), 0) == 0) return 0;
    if (nodes.empty() && errno != ENOSYS) return errno;
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
