// The NUMA variant of the OS layer (host_os_numa.cpp, TIERPACK_WITH_NUMA=ON) on the real kernel: bind,
// range and thread policies over node sets, and policy_of reading them back (node 0 exists everywhere).
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "platform/host_os.hpp"
#include "tests/platform/host_os_test_util.hpp"

namespace tierpack::host {
namespace {

using namespace test;

TEST(HostOs, MapBindQueryOnNodeZero) {
  HostOs& os = system_os();
  ASSERT_GE(os.node_count(), 1);
  const std::size_t page = os.page_size();
  void* p = nullptr;
  ASSERT_EQ(os.map(8 * page, &p), 0);
  ASSERT_EQ(os.bind(p, 8 * page, 0, BindMode::strict, false), 0);
  int mode = -1, node = -2;
  ASSERT_EQ(os.policy_of(p, &mode, &node), 0);
  EXPECT_EQ(node, 0);

  std::vector<void*> pages;
  for (int i = 0; i < 8; ++i) pages.push_back(static_cast<char*>(p) + i * page);
  std::vector<int> status(8, 99);
  std::memset(p, 1, 4 * page);  // touch the first half only
  ASSERT_EQ(os.move_pages(pages, {}, status), 0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(status[i], 0) << "page " << i;
  for (int i = 4; i < 8; ++i) EXPECT_EQ(status[i], -ENOENT) << "page " << i;

  // Moving to the node the pages are on is a no-op that reports the node.
  std::vector<int> nodes(8, 0);
  ASSERT_EQ(os.move_pages(pages, nodes, status), 0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(status[i], 0);
  EXPECT_EQ(os.bind(p, 8 * page, 0, BindMode::preferred, true), 0);
  EXPECT_EQ(os.purge(p, 8 * page, false), 0);
  ASSERT_EQ(os.move_pages(pages, {}, status), 0);
  EXPECT_EQ(status[0], -ENOENT) << "purged pages are gone until touched again";
  EXPECT_EQ(os.unmap(p, 8 * page), 0);
}

TEST(HostOs, BadBindArgumentsReturnErrno) {
  HostOs& os = system_os();
  void* p = nullptr;
  ASSERT_EQ(os.map(os.page_size(), &p), 0);
  EXPECT_NE(os.bind(p, os.page_size(), 5000, BindMode::strict, false), 0);
  EXPECT_EQ(os.bind(static_cast<char*>(p) + 1, os.page_size(), 0, BindMode::strict, false), EINVAL);
  os.unmap(p, os.page_size());
}

TEST(HostOs, SetPolicyOverANodeSet) {
  HostOs& os = system_os();
  const std::size_t page = os.page_size();
  void* p = nullptr;
  ASSERT_EQ(os.map(8 * page, &p), 0);
  const std::vector<int> zero{0};
  const struct {
    NodePolicy policy;
    int mode;
  } cases[] = {{NodePolicy::interleave, kMpolInterleave}, {NodePolicy::bind, kMpolBind},
               {NodePolicy::preferred, kMpolPreferred}};
  for (const auto& c : cases) {
    ASSERT_EQ(os.set_policy(p, 8 * page, c.policy, zero), 0);
    int mode = -1, node = -2;
    ASSERT_EQ(os.policy_of(p, &mode, &node), 0);
    EXPECT_EQ(mode, c.mode);
    EXPECT_EQ(node, 0);
  }
  ASSERT_EQ(os.set_policy(p, 8 * page, NodePolicy::local, {}), 0);
  int mode = -1, node = -2;
  ASSERT_EQ(os.policy_of(p, &mode, &node), 0);
  EXPECT_EQ(mode, kMpolDefault);
  EXPECT_EQ(node, -1);
  std::memset(p, 1, 8 * page);  // the range's pages are allocated under the policy set last

  const std::vector<int> far{5000};
  EXPECT_EQ(os.set_policy(p, 8 * page, NodePolicy::interleave, far), EINVAL) << "node outside any mask";
  EXPECT_EQ(os.set_policy(p, 8 * page, NodePolicy::bind, {}), EINVAL) << "bind needs a node";
  EXPECT_EQ(os.unmap(p, 8 * page), 0);
  EXPECT_EQ(os.set_policy(unmapped_range(os, 8 * page), 8 * page, NodePolicy::bind, zero), EFAULT);
}

TEST(HostOs, SetThreadPolicyAndBackToDefault) {
  // On a thread of its own: the policy is per thread, and this one ends with the test.
  std::thread([] {
    HostOs& os = system_os();
    auto thread_mode = [] {
      int mode = -1;
      EXPECT_EQ(::syscall(SYS_get_mempolicy, &mode, nullptr, 0ul, nullptr, 0ul), 0);
      return mode;
    };
    const std::vector<int> zero{0};
    ASSERT_EQ(os.set_thread_policy(NodePolicy::interleave, zero), 0);
    EXPECT_EQ(thread_mode(), kMpolInterleave);
    ASSERT_EQ(os.set_thread_policy(NodePolicy::bind, zero), 0);
    EXPECT_EQ(thread_mode(), kMpolBind);
    const std::vector<int> far{5000};
    EXPECT_EQ(os.set_thread_policy(NodePolicy::preferred, far), EINVAL);
    EXPECT_EQ(os.set_thread_policy(NodePolicy::interleave, {}), EINVAL) << "interleave needs a node";
    EXPECT_EQ(thread_mode(), kMpolBind) << "a refused call changes nothing";
    ASSERT_EQ(os.set_thread_policy(NodePolicy::local, {}), 0);
    EXPECT_EQ(thread_mode(), kMpolDefault);
  }).join();
}

}  // namespace
}  // namespace tierpack::host
