// query_page_nodes (move_pages residency) and make_page_tracer's run-time choice.
#include <sys/mman.h>

#include <cerrno>

#include <gtest/gtest.h>

#include "profiler/detail/page_tracer_backends.hpp"
#include "profiler/page_tracer.hpp"
#include "tests/profiler/mapping.hpp"

using namespace tierpack;
using tierpack::test::Mapping;

namespace {

TEST(QueryPageNodes, TouchedPagesHaveANodeUntouchedOnesENOENT) {
  Mapping m(8);
  m.write(0);
  m.write(5);
  std::vector<void*> pages;
  for (std::size_t i = 0; i < m.pages(); ++i) pages.push_back(m.page(i));
  const auto nodes = query_page_nodes(pages);
  ASSERT_EQ(nodes.size(), pages.size());
  // CI machines have one NUMA node (0); a multi-node machine may have put them anywhere.
  EXPECT_GE(nodes[0], 0);
  EXPECT_GE(nodes[5], 0);
  for (auto i : {1, 2, 3, 4, 6, 7}) EXPECT_EQ(nodes[i], -ENOENT) << "page " << i;
}

TEST(QueryPageNodes, NodeZeroOnAOneNodeMachine) {
  if (::access("/sys/devices/system/node/node1", F_OK) == 0) GTEST_SKIP() << "more than one NUMA node here";
  Mapping m(4);
  m.write(2);
  const auto nodes = query_page_nodes({m.page(2)});
  EXPECT_EQ(nodes, std::vector<int>{0});
}

TEST(QueryPageNodes, UnmappedAddressIsEFAULT) {
  Mapping m(2);
  m.write(0);
  void* hole = m.page(1);
  ::munmap(hole, m.page_size());  // Mapping's munmap of the whole range later is still fine
  const auto nodes = query_page_nodes({m.page(0), hole});
  EXPECT_GE(nodes[0], 0);
  EXPECT_EQ(nodes[1], -EFAULT);
}

TEST(QueryPageNodes, LargeQueriesGoInBatches) {
  const std::size_t n = 40000;  // more than one batch of 16384
  Mapping m(n);
  std::vector<void*> pages;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 1000 == 0) m.write(i);
    pages.push_back(m.page(i));
  }
  const auto nodes = query_page_nodes(pages);
  ASSERT_EQ(nodes.size(), n);
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 1000 == 0) ASSERT_GE(nodes[i], 0) << i;
    else ASSERT_EQ(nodes[i], -ENOENT) << i;
  }
  EXPECT_TRUE(query_page_nodes({}).empty());
}

TEST(MakePageTracer, AutomaticPrefersUffdWpAndSaysWhyNot) {
  const auto uffd = detail::probe_uffd_wp();
  std::string why = "stale";
  auto t = make_page_tracer(PageTracerKind::automatic, &why);
  if (uffd.available) {
    EXPECT_EQ(t->name(), "uffd-wp");
    EXPECT_TRUE(why.empty()) << why;
  } else {
    EXPECT_EQ(t->name(), "mprotect");
    EXPECT_NE(why.find(uffd.why), std::string::npos) << why;
  }
  std::printf("automatic -> %s%s%s\n", std::string(t->name()).c_str(), why.empty() ? "" : ": ", why.c_str());
}

TEST(MakePageTracer, ExplicitKinds) {
  std::string why;
  EXPECT_EQ(make_page_tracer(PageTracerKind::off, &why)->name(), "none");
  EXPECT_EQ(make_page_tracer(PageTracerKind::mprotect, &why)->name(), "mprotect");
  EXPECT_TRUE(why.empty());
  auto u = make_page_tracer(PageTracerKind::uffd, &why);
  if (detail::probe_uffd_wp().available) EXPECT_EQ(u->name(), "uffd-wp");
  else EXPECT_FALSE(why.empty());
  // The none tracer accepts everything and reports nothing.
  auto none = make_page_tracer(PageTracerKind::off);
  Mapping m(2);
  none->track(m.base(), m.bytes());
  m.write(0);
  std::vector<PageTouch> out;
  none->end_window(out);
  EXPECT_TRUE(out.empty());
  none->untrack(m.base(), m.bytes());
}

TEST(Probes, SayWhatIsMissing) {
  // Each probe either succeeds or names what is missing; on this project's CI machine soft-dirty
  // is absent (and the probe must say so) while uffd-wp is present.
  for (const auto& s : {detail::probe_uffd_wp(), detail::probe_soft_dirty()}) {
    if (s.available) EXPECT_TRUE(s.why.empty());
    else EXPECT_FALSE(s.why.empty());
  }
  std::printf("uffd-wp: %s\nsoft-dirty: %s\n", detail::probe_uffd_wp().available ? "available" : detail::probe_uffd_wp().why.c_str(),
              detail::probe_soft_dirty().available ? "available" : detail::probe_soft_dirty().why.c_str());
}

}  // namespace
