// The one-node variant of the OS layer (host_os_single_node.cpp, TIERPACK_WITH_NUMA=OFF): policies
// naming node 0 are accepted and change nothing, any other node is refused, pages never move, and
// policy_of reports the default policy.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "platform/host_os.hpp"
#include "tests/platform/host_os_test_util.hpp"

namespace tierpack::host {
namespace {

using namespace test;

TEST(SingleNodeOs, PoliciesOnNodeZeroOnly) {
  HostOs& os = system_os();
  EXPECT_EQ(os.node_count(), 1);
  Mapped m(4);
  void* const p = m.p;
  const std::size_t page = m.page;
  const std::vector<int> zero{0}, one{1}, both{0, 1};
  for (NodePolicy policy : {NodePolicy::preferred, NodePolicy::bind, NodePolicy::interleave}) {
    EXPECT_EQ(os.set_policy(p, 4 * page, policy, zero), 0);
    EXPECT_EQ(os.set_policy(p, 4 * page, policy, one), EINVAL);
    EXPECT_EQ(os.set_policy(p, 4 * page, policy, both), EINVAL);
    std::thread([&] {
      EXPECT_EQ(os.set_thread_policy(policy, zero), 0);
      EXPECT_EQ(os.set_thread_policy(policy, one), EINVAL);
    }).join();
  }
  EXPECT_EQ(os.set_policy(p, 4 * page, NodePolicy::preferred, {}), 0) << "preferred without a node: local";
  EXPECT_EQ(os.set_policy(p, 4 * page, NodePolicy::bind, {}), EINVAL);
  EXPECT_EQ(os.set_thread_policy(NodePolicy::interleave, {}), EINVAL);
  EXPECT_EQ(os.set_thread_policy(NodePolicy::local, {}), 0);
  EXPECT_EQ(os.bind(p, 4 * page, 0, BindMode::strict, true), 0);
  EXPECT_EQ(os.bind(p, 4 * page, 1, BindMode::strict, true), EINVAL);
  int mode = -1, node = -2;
  ASSERT_EQ(os.policy_of(p, &mode, &node), 0);
  EXPECT_EQ(mode, kMpolDefault);
  EXPECT_EQ(node, -1);
}

TEST(SingleNodeOs, MovesReportNodeZeroOrRefuseOtherNodes) {
  Mapped m(2);
  std::memset(m.p, 1, m.bytes);
  std::vector<void*> pages{m.at(0), m.at(1)};
  std::vector<int> nodes{0, 1}, status(2, 99);
  ASSERT_EQ(system_os().move_pages(pages, nodes, status), 0);
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], -EINVAL);
}

}  // namespace
}  // namespace tierpack::host
