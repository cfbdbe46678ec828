// Conformance suite every page tracer backend must pass: exactly the pages touched in each window,
// re-arming across many windows, untrack restoring access, several ranges, huge-page-backed memory.
// Backends the kernel lacks are skipped with the probe's reason.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "profiler/detail/page_tracer_backends.hpp"
#include "profiler/page_tracer.hpp"
#include "tests/profiler/mapping.hpp"

using namespace tierpack;
using tierpack::test::Mapping;

namespace {

/// page index -> written, for the pages of one mapping.
using Seen = std::map<std::size_t, bool>;

Seen end_window(PageTracer& t, const Mapping& m) {
  std::vector<PageTouch> out;
  t.end_window(out);
  Seen seen;
  for (const auto& p : out) {
    EXPECT_EQ(p.page % m.page_size(), 0u);
    EXPECT_GE(p.page, m.addr(0));
    EXPECT_LT(p.page, m.addr(0) + m.bytes());
    EXPECT_EQ(seen.count(m.index_of(p.page)), 0u) << "page reported twice in one window";
    seen[m.index_of(p.page)] = p.written;
  }
  return seen;
}

Seen written(std::initializer_list<std::size_t> pages) {
  Seen s;
  for (auto p : pages) s[p] = true;
  return s;
}

class PageTracerConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string& kind = GetParam();
    if (kind == "uffd-wp") {
      const auto s = detail::probe_uffd_wp();
      if (!s.available) GTEST_SKIP() << "uffd-wp tracer unavailable here: " << s.why;
      tracer_ = detail::make_uffd_wp_tracer();
    } else if (kind == "soft-dirty") {
      const auto s = detail::probe_soft_dirty();
      if (!s.available) GTEST_SKIP() << "soft-dirty tracer unavailable here: " << s.why;
      tracer_ = detail::make_soft_dirty_tracer();
    } else {
      tracer_ = detail::make_mprotect_tracer();
    }
    ASSERT_EQ(tracer_->name(), kind);
  }
  bool sees_reads() const { return tracer_->sees_reads(); }

  std::unique_ptr<PageTracer> tracer_;
};

TEST_P(PageTracerConformance, ReportsExactlyThePagesWrittenInEachWindow) {
  Mapping m(64);
  tracer_->track(m.base(), m.bytes());
  for (auto i : {1, 5, 6, 7, 40}) m.write(i);
  EXPECT_EQ(end_window(*tracer_, m), written({1, 5, 6, 7, 40}));
  for (auto i : {2, 5}) m.write(i, 2);
  m.write(2, 3);  // twice in one window: reported once
  EXPECT_EQ(end_window(*tracer_, m), written({2, 5}));
  EXPECT_EQ(end_window(*tracer_, m), Seen{});
  m.write(63);
  EXPECT_EQ(end_window(*tracer_, m), written({63}));
  // The data written while tracked is all there.
  EXPECT_EQ(m.read(2), 3);
  EXPECT_EQ(m.read(5), 2);
  EXPECT_EQ(m.read(40), 1);
  EXPECT_EQ(m.read(0), 0);
  const auto st = tracer_->stats();
  EXPECT_EQ(st.windows, 4u);
  EXPECT_EQ(st.pages_reported, 8u);
  EXPECT_EQ(st.dropped, 0u);
}

TEST_P(PageTracerConformance, ReadsAreReportedOnlyByTracersThatSeeReads) {
  Mapping m(16);
  m.write(3, 9);  // populated before tracking: not in any window
  tracer_->track(m.base(), m.bytes());
  EXPECT_EQ(m.read(3), 9);
  EXPECT_EQ(m.read(4), 0);  // never-touched page: the zero page
  const Seen reads = end_window(*tracer_, m);
  if (sees_reads()) EXPECT_EQ(reads, (Seen{{3, false}, {4, false}}));
  else EXPECT_EQ(reads, Seen{});
  // Read then write in one window: written. A page read before is write-tracked again.
  EXPECT_EQ(m.read(8), 0);
  m.write(8);
  m.write(3);
  EXPECT_EQ(end_window(*tracer_, m), written({3, 8}));
}

TEST_P(PageTracerConformance, RearmsAcrossManyWindows) {
  Mapping m(128);
  tracer_->track(m.base(), m.bytes());
  std::mt19937 rng(12345);
  std::vector<char> model(m.pages(), 0);
  for (int w = 0; w < 200; ++w) {
    Seen expect;
    const int n = static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) {
      const std::size_t i = rng() % m.pages();
      const bool write = !sees_reads() || rng() % 2 == 0;
      if (write) {
        model[i] = static_cast<char>(rng() % 100 + 1);
        m.write(i, model[i]);
        expect[i] = true;
      } else {
        EXPECT_EQ(m.read(i), model[i]);
        expect.emplace(i, false);  // stays true if written earlier in this window
      }
    }
    ASSERT_EQ(end_window(*tracer_, m), expect) << "window " << w << " (seed 12345)";
  }
  for (std::size_t i = 0; i < m.pages(); ++i) ASSERT_EQ(m.read(i), model[i]);
}

TEST_P(PageTracerConformance, UntrackRestoresAccessAndStopsReporting) {
  Mapping m(32);
  tracer_->track(m.base(), m.bytes());
  m.write(1, 11);
  tracer_->untrack(m.base(), m.bytes());
  // Everything is accessible again, reads and writes, and nothing more is reported.
  for (std::size_t i = 0; i < m.pages(); ++i) m.write(i, static_cast<char>(m.read(i) + 1));
  std::vector<PageTouch> out;
  tracer_->end_window(out);
  for (const auto& p : out) EXPECT_EQ(m.index_of(p.page), 1u) << "only the page touched while tracked may show";
  out.clear();
  tracer_->end_window(out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(m.read(1), 12);
  EXPECT_EQ(m.read(2), 1);
  // Tracking the same range again works.
  tracer_->track(m.base(), m.bytes());
  m.write(30);
  EXPECT_EQ(end_window(*tracer_, m), written({30}));
  tracer_->untrack(m.base(), m.bytes());
}

TEST_P(PageTracerConformance, PartialUntrackKeepsTheRest) {
  Mapping m(32);
  tracer_->track(m.base(), m.bytes());
  tracer_->untrack(m.page(8), 8 * m.page_size());  // pages 8..15 leave
  for (std::size_t i = 0; i < m.pages(); ++i) m.write(i);
  Seen expect;
  for (std::size_t i = 0; i < m.pages(); ++i)
    if (i < 8 || i >= 16) expect[i] = true;
  EXPECT_EQ(end_window(*tracer_, m), expect);
  for (auto i : {0, 9, 31}) m.write(i, 5);
  EXPECT_EQ(end_window(*tracer_, m), written({0, 31}));
}

TEST_P(PageTracerConformance, SeveralRanges) {
  Mapping a(8), b(8), c(8);
  tracer_->track(a.base(), a.bytes());
  tracer_->track(b.base(), b.bytes());
  a.write(0);
  b.write(7);
  c.write(3);  // untracked
  std::vector<PageTouch> out;
  tracer_->end_window(out);
  std::set<std::uintptr_t> pages;
  for (const auto& p : out) pages.insert(p.page);
  EXPECT_EQ(pages, (std::set<std::uintptr_t>{a.addr(0), b.addr(7)}));
  tracer_->untrack(a.base(), a.bytes());
  a.write(1);
  b.write(1);
  EXPECT_EQ(end_window(*tracer_, b), written({1}));
}

TEST_P(PageTracerConformance, RejectsBadRanges) {
  Mapping m(4);
  EXPECT_THROW(tracer_->track(m.base() + 1, m.page_size()), logic_error);
  EXPECT_THROW(tracer_->track(m.base(), m.page_size() + 3), logic_error);
  EXPECT_THROW(tracer_->track(m.base(), 0), logic_error);
  tracer_->track(m.base(), m.bytes());
  EXPECT_THROW(tracer_->track(m.page(1), m.page_size()), logic_error);
}

TEST_P(PageTracerConformance, HugePageBackedRangeReportsSmallPages) {
  // A range populated with transparent huge pages before tracking: the tracer must still report
  // 4 KiB pages (the kernel splits the huge mapping), not whole 2 MiB runs.
  const std::size_t page = detail::host_page_size();
  const std::size_t huge = std::size_t{2} << 20;
  void* raw = ::mmap(nullptr, 2 * huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(raw, MAP_FAILED);
  char* base = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(raw) + huge - 1) & ~(huge - 1));
  ::madvise(base, huge, MADV_HUGEPAGE);
  std::memset(base, 1, huge);
  tracer_->track(base, huge);
  base[3 * page] = 2;
  base[400 * page + 5] = 3;
  std::vector<PageTouch> out;
  tracer_->end_window(out);
  std::set<std::uintptr_t> pages;
  for (const auto& p : out) pages.insert(p.page);
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  EXPECT_EQ(pages, (std::set<std::uintptr_t>{b + 3 * page, b + 400 * page}));
  EXPECT_EQ(base[400 * page + 5], 3);
  EXPECT_EQ(base[401 * page], 1);
  tracer_->untrack(base, huge);
  ::munmap(raw, 2 * huge);
}

INSTANTIATE_TEST_SUITE_P(Backends, PageTracerConformance, ::testing::Values("mprotect", "uffd-wp", "soft-dirty"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
