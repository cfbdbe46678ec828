// HostOs on the real kernel (one node here) and the fault-injecting adaptor in front of it.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "alloc/host/fault_injecting_os.hpp"
#include "alloc/host/host_os.hpp"

namespace tierpack::host {
namespace {

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

TEST(HostOs, BadArgumentsReturnErrno) {
  HostOs& os = system_os();
  void* p = nullptr;
  ASSERT_EQ(os.map(os.page_size(), &p), 0);
  EXPECT_NE(os.bind(p, os.page_size(), 5000, BindMode::strict, false), 0);
  EXPECT_EQ(os.bind(static_cast<char*>(p) + 1, os.page_size(), 0, BindMode::strict, false), EINVAL);
  std::vector<void*> pages{p};
  std::vector<int> status(2);
  EXPECT_EQ(os.move_pages(pages, {}, status), EINVAL) << "status size must match";
  os.unmap(p, os.page_size());
}

TEST(FaultInjectingOs, InjectsPerCallErrno) {
  FaultInjectingOs os(system_os());
  void* p = nullptr;
  os.fail_next(OsCall::map, ENOMEM, 2);
  EXPECT_EQ(os.map(os.page_size(), &p), ENOMEM);
  EXPECT_EQ(os.map(os.page_size(), &p), ENOMEM);
  ASSERT_EQ(os.map(os.page_size(), &p), 0);
  EXPECT_EQ(os.calls(OsCall::map), 3u);
  EXPECT_EQ(os.injected(), 2u);

  os.fail_next(OsCall::bind, EBUSY, 1, /*moving_only=*/true);
  EXPECT_EQ(os.bind(p, os.page_size(), 0, BindMode::preferred, false), 0) << "non-moving bind passes";
  EXPECT_EQ(os.bind(p, os.page_size(), 0, BindMode::preferred, true), EBUSY);
  EXPECT_EQ(os.bind(p, os.page_size(), 0, BindMode::preferred, true), 0);
  os.unmap(p, os.page_size());
}

TEST(FaultInjectingOs, InjectsPerPageStatusAndForwardsTheRest) {
  FaultInjectingOs os(system_os());
  const std::size_t page = os.page_size();
  void* p = nullptr;
  ASSERT_EQ(os.map(3 * page, &p), 0);
  std::memset(p, 7, 3 * page);
  char* c = static_cast<char*>(p);
  std::vector<void*> pages{c, c + page, c + 2 * page};
  std::vector<int> nodes(3, 0), status(3, 99);
  os.fail_page(c + page + 17, -EBUSY, 1);  // any address in the page
  os.fail_page(c + 2 * page, -EACCES, 1);
  ASSERT_EQ(os.move_pages(pages, nodes, status), 0);
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], -EBUSY);
  EXPECT_EQ(status[2], -EACCES);
  ASSERT_EQ(os.move_pages(pages, nodes, status), 0);
  EXPECT_EQ(status[1], 0) << "an injection with times=1 applies once";
  EXPECT_EQ(status[2], 0);
  for (std::size_t i = 0; i < 3 * page; ++i) ASSERT_EQ(c[i], 7);
  os.unmap(p, 3 * page);
}

}  // namespace
}  // namespace tierpack::host
