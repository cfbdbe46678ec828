// The OS layer on the real kernel, what both variants (NUMA and one-node) share: mappings,
// reservations, commits, mlock, the move_pages query, and the fault-injecting adaptor in front of it.
// Every primitive is shown working and failing with the kernel's own errno. The node calls of each
// variant: host_os_numa_test.cpp, host_os_single_node_test.cpp.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "platform/fault_injecting_os.hpp"
#include "platform/host_os.hpp"
#include "tests/platform/host_os_test_util.hpp"

namespace tierpack::host {
namespace {

using test::Mapped;
using test::unmapped_range;

/// The permissions ("rw-p", "---p") of the mapping holding `addr`, from /proc/self/maps; "" if none.
std::string permissions_at(const void* addr) {
  std::ifstream maps("/proc/self/maps");
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long begin = 0, end = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &begin, &end, perms) == 3 && a >= begin && a < end) return perms;
  }
  return {};
}

TEST(HostOs, QueryReportsUntouchedAndUnmappedPages) {
  HostOs& os = system_os();
  Mapped m(2);
  std::memset(m.p, 1, m.page);
  std::vector<void*> pages{m.at(0), m.at(1), unmapped_range(os, m.page)};
  std::vector<int> status(3, 99);
  ASSERT_EQ(os.move_pages(pages, {}, status), 0);
  EXPECT_GE(status[0], 0) << "touched: its node";
  EXPECT_EQ(status[1], -ENOENT) << "never touched";
  EXPECT_EQ(status[2], -EFAULT) << "not mapped";
  std::vector<int> short_status(2);
  EXPECT_EQ(os.move_pages(pages, {}, short_status), EINVAL) << "status size must match";
}

TEST(HostOs, ReserveThenCommitPartOfIt) {
  HostOs& os = system_os();
  const std::size_t page = os.page_size();
  void* p = nullptr;
  ASSERT_EQ(os.reserve(16 * page, &p), 0);
  char* c = static_cast<char*>(p);
  EXPECT_EQ(permissions_at(c), "---p");
  ASSERT_EQ(os.commit(c + 4 * page, 4 * page), 0);
  EXPECT_EQ(permissions_at(c + 4 * page), "rw-p");
  EXPECT_EQ(permissions_at(c + 8 * page), "---p") << "only the committed part is accessible";
  for (std::size_t i = 0; i < 4 * page; ++i) ASSERT_EQ(c[4 * page + i], 0) << "committed pages read zeroed";
  std::memset(c + 4 * page, 5, 4 * page);
  EXPECT_EQ(os.unmap(p, 16 * page), 0);
  EXPECT_EQ(permissions_at(c), "");
}

TEST(HostOs, ReserveAndCommitFailWithTheKernelsErrno) {
  HostOs& os = system_os();
  const std::size_t page = os.page_size();
  void* p = nullptr;
  EXPECT_EQ(os.reserve(std::size_t{1} << 62, &p), ENOMEM) << "more address space than the process has";
  EXPECT_EQ(p, nullptr) << "a failed reserve leaves *out alone";
  EXPECT_EQ(os.commit(unmapped_range(os, 4 * page), 4 * page), ENOMEM) << "nothing mapped there";
  ASSERT_EQ(os.reserve(4 * page, &p), 0);
  EXPECT_EQ(os.commit(static_cast<char*>(p) + 1, page), EINVAL) << "not page-aligned";
  os.unmap(p, 4 * page);
}

// ASan's and TSan's runtimes replace mlock with a no-op that returns 0 (sanitizer_common's
// MlockIsUnsupported): there is nothing of the kernel's to check under them.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kMlockIsANoOp = true;
#elif defined(__has_feature)
constexpr bool kMlockIsANoOp = __has_feature(address_sanitizer) || __has_feature(thread_sanitizer);
#else
constexpr bool kMlockIsANoOp = false;
#endif

TEST(HostOs, LockFaultsPagesInAndFailsOnHoles) {
  if (kMlockIsANoOp) GTEST_SKIP() << "the sanitizer's runtime turns mlock into a no-op";
  HostOs& os = system_os();
  const std::size_t page = os.page_size();
  void* p = nullptr;
  ASSERT_EQ(os.map(4 * page, &p), 0);
  ASSERT_EQ(os.lock(p, 4 * page), 0);
  std::vector<void*> pages;
  for (int i = 0; i < 4; ++i) pages.push_back(static_cast<char*>(p) + i * page);
  std::vector<int> status(4, 99);
  ASSERT_EQ(os.move_pages(pages, {}, status), 0);
  for (int i = 0; i < 4; ++i) EXPECT_GE(status[i], 0) << "mlock populated page " << i << " without a touch";
  EXPECT_EQ(os.unmap(p, 4 * page), 0);
  EXPECT_EQ(os.lock(unmapped_range(os, 4 * page), 4 * page), ENOMEM);
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

TEST(FaultInjectingOs, InjectsIntoEveryNewPrimitiveThenForwards) {
  FaultInjectingOs os(system_os());
  const std::size_t page = os.page_size();
  const std::vector<int> zero{0};
  void* p = nullptr;
  for (OsCall call : {OsCall::reserve, OsCall::commit, OsCall::lock, OsCall::set_policy, OsCall::set_thread_policy})
    os.fail_next(call, EPERM);
  EXPECT_EQ(os.reserve(4 * page, &p), EPERM);
  ASSERT_EQ(os.reserve(4 * page, &p), 0);
  EXPECT_EQ(os.commit(p, page), EPERM);
  ASSERT_EQ(os.commit(p, page), 0);
  EXPECT_EQ(os.lock(p, page), EPERM);
  EXPECT_EQ(os.lock(p, page), 0);
  EXPECT_EQ(os.set_policy(p, page, NodePolicy::preferred, zero), EPERM);
  EXPECT_EQ(os.set_policy(p, page, NodePolicy::preferred, zero), 0);
  std::thread([&] {
    EXPECT_EQ(os.set_thread_policy(NodePolicy::preferred, zero), EPERM);
    EXPECT_EQ(os.set_thread_policy(NodePolicy::preferred, zero), 0);
  }).join();
  for (OsCall call : {OsCall::reserve, OsCall::commit, OsCall::lock, OsCall::set_policy, OsCall::set_thread_policy})
    EXPECT_EQ(os.calls(call), 2u);
  EXPECT_EQ(os.injected(), 5u);
  EXPECT_EQ(os.unmap(p, 4 * page), 0);
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
