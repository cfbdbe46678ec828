// The page join's logic against a test-double tracer (fake_page_tracer.hpp): attribution of touched
// pages to tensors, false sharing, hidden accesses, tracking and release of pages, residency.
#include <gtest/gtest.h>

#include "profiler/event_recorder.hpp"
#include "profiler/page_join.hpp"
#include "tests/profiler/fake_page_tracer.hpp"

using namespace tierpack;
using test::FakePageTracer;

namespace {
constexpr std::uintptr_t kPage = 4096;
constexpr std::uintptr_t kBase = 0x7f0000000000;

std::vector<TensorRecord> records(std::size_t n) {
  std::vector<TensorRecord> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i].id = static_cast<std::uint32_t>(i);
  return t;
}
}  // namespace

TEST(PageJoin, TracksRunsOfPagesOnceAndReleasesThemWhenTheLastTensorGoes) {
  FakePageTracer tracer;
  PageJoin join(tracer, kPage);
  join.add(0, kBase, 4 * kPage);            // 4 pages, one track() call
  join.add(1, kBase + 4 * kPage - 64, 128);  // straddles page 3 (tracked) and page 4 (new)
  EXPECT_EQ(tracer.track_calls, 2);
  EXPECT_EQ(tracer.tracked.size(), 5u);
  std::vector<std::uint32_t> used;
  join.remove(0);
  join.end_window(used);
  EXPECT_EQ(tracer.tracked.size(), 2u);  // pages 3 and 4 still hold tensor 1
  join.remove(1);
  join.end_window(used);
  EXPECT_TRUE(tracer.tracked.empty());
}

TEST(PageJoin, AttributesTouchesAndCountsWindowsPerTensor) {
  FakePageTracer tracer;
  PageJoin join(tracer, kPage);
  join.add(0, kBase, 3 * kPage);
  std::vector<std::uint32_t> used{0};
  tracer.touch(kBase, true);
  tracer.touch(kBase + kPage, false);
  join.end_window(used);
  used = {0};
  tracer.touch(kBase + 10, false);
  join.end_window(used);
  join.stop(used);
  auto t = records(1);
  std::vector<PageRecord> pages;
  std::vector<TensorClass> cls{TensorClass::iteration};
  join.apply(t, cls, {}, pages);
  EXPECT_EQ(t[0].pages, 3u);
  EXPECT_EQ(t[0].pages_touched, 2u);
  EXPECT_EQ(t[0].page_touches, 3u);
  EXPECT_EQ(t[0].pages_written, 1u);
  EXPECT_FALSE(t[0].has(kTensorHiddenAccess));
  EXPECT_TRUE(pages.empty());  // nothing notable: one tensor, all touches reported
}

TEST(PageJoin, TwoLifetimeClassesOnOnePageAreFalseSharing) {
  FakePageTracer tracer;
  PageJoin join(tracer, kPage);
  join.add(0, kBase, 64);        // persistent
  join.add(1, kBase + 64, 64);   // temporary, same page
  join.add(2, kBase + kPage, 64);  // alone on the next page
  std::vector<std::uint32_t> used{1};
  tracer.touch(kBase + 64);
  join.end_window(used);
  join.stop(used);
  auto t = records(3);
  std::vector<PageRecord> pages;
  std::vector<TensorClass> cls{TensorClass::persistent, TensorClass::temporary, TensorClass::temporary};
  join.apply(t, cls, {}, pages);
  ASSERT_EQ(pages.size(), 1u);
  EXPECT_EQ(pages[0].address, kBase);
  EXPECT_TRUE(pages[0].false_shared);
  EXPECT_EQ(pages[0].tensors, (std::vector<std::uint32_t>{0, 1}));
  EXPECT_TRUE(t[0].has(kTensorFalseShared));
  EXPECT_TRUE(t[1].has(kTensorFalseShared));
  EXPECT_FALSE(t[2].has(kTensorFalseShared));
  // The touch on the shared page counts for both tensors: the OS cannot tell them apart.
  EXPECT_EQ(t[0].pages_touched, 1u);
  EXPECT_EQ(t[1].pages_touched, 1u);
}

TEST(PageJoin, SameClassOrDisjointLifetimesAreNotFalseSharing) {
  FakePageTracer tracer;
  PageJoin join(tracer, kPage);
  std::vector<std::uint32_t> used;
  join.add(0, kBase, 64);
  join.add(1, kBase + 64, 64);
  join.remove(0);
  join.end_window(used);
  join.add(2, kBase, 64);  // re-uses tensor 0's bytes after its free: never coexisted
  join.stop(used);
  auto t = records(3);
  std::vector<PageRecord> pages;
  std::vector<TensorClass> cls{TensorClass::temporary, TensorClass::temporary, TensorClass::persistent};
  // 0 and 1 coexist (same class); 2 coexists with 1 (different class) -> shared.
  join.apply(t, cls, {}, pages);
  ASSERT_EQ(pages.size(), 1u);
  EXPECT_TRUE(pages[0].false_shared);
  std::vector<PageRecord> pages2;
  std::vector<TensorClass> cls2{TensorClass::persistent, TensorClass::temporary, TensorClass::temporary};
  auto t2 = records(3);
  join.apply(t2, cls2, {}, pages2);  // 0 (persistent) never met 2; 0 met 1 (different) -> still shared
  EXPECT_TRUE(pages2[0].false_shared);
  std::vector<TensorClass> cls3{TensorClass::temporary, TensorClass::temporary, TensorClass::temporary};
  std::vector<PageRecord> pages3;
  auto t3 = records(3);
  join.apply(t3, cls3, {}, pages3);
  EXPECT_FALSE(pages3[0].false_shared);
  EXPECT_FALSE(t3[2].has(kTensorFalseShared));
}

TEST(PageJoin, ATouchNoReportedOpExplainsIsAHiddenAccess) {
  FakePageTracer tracer;
  PageJoin join(tracer, kPage);
  join.add(0, kBase, kPage);
  join.add(1, kBase + 2 * kPage, kPage);
  std::vector<std::uint32_t> used{0};
  tracer.touch(kBase);              // op uses tensor 0: fine
  tracer.touch(kBase + 2 * kPage);  // nobody reported tensor 1
  join.end_window(used);
  join.stop(used);
  auto t = records(2);
  std::vector<PageRecord> pages;
  std::vector<TensorClass> cls(2, TensorClass::iteration);
  join.apply(t, cls, {}, pages);
  EXPECT_FALSE(t[0].has(kTensorHiddenAccess));
  EXPECT_TRUE(t[1].has(kTensorHiddenAccess));
  ASSERT_EQ(pages.size(), 1u);
  EXPECT_EQ(pages[0].address, kBase + 2 * kPage);
  EXPECT_EQ(pages[0].hidden_windows, 1u);
  EXPECT_EQ(pages[0].tensors, std::vector<std::uint32_t>{1});
}

TEST(PageJoin, AFreedTensorStillOwnsItsPagesInTheWindowOfItsFree) {
  FakePageTracer tracer;
  PageJoin join(tracer, kPage);
  join.add(0, kBase, kPage);
  join.remove(0);             // freed by the op running in this window...
  tracer.touch(kBase);        // ...which wrote it first
  std::vector<std::uint32_t> used{0};
  join.end_window(used);
  auto t = records(1);
  std::vector<PageRecord> pages;
  std::vector<TensorClass> cls(1, TensorClass::temporary);
  join.stop(used);
  join.apply(t, cls, {}, pages);
  EXPECT_EQ(t[0].pages_touched, 1u);
  EXPECT_FALSE(t[0].has(kTensorHiddenAccess));
  EXPECT_TRUE(tracer.tracked.empty());
}

TEST(PageJoin, ResidencyGivesTheMajorityTier) {
  FakePageTracer tracer;
  auto nodes = [](const std::vector<void*>& pages) {
    std::vector<int> out;
    for (void* p : pages) out.push_back(reinterpret_cast<std::uintptr_t>(p) < kBase + 2 * kPage ? 1 : 0);
    return out;
  };
  PageJoin join(tracer, kPage, nodes);
  join.add(0, kBase, 3 * kPage);  // pages on nodes 1, 1, 0
  std::vector<std::uint32_t> used;
  join.stop(used);
  auto t = records(1);
  std::vector<PageRecord> pages;
  std::vector<TensorClass> cls(1, TensorClass::iteration);
  join.apply(t, cls, [](int node) { return static_cast<TierId>(node + 10); }, pages);
  EXPECT_EQ(t[0].tier, 11);
}

// The recorder drives the join: op windows, used sets from inputs/outputs and allocations.
TEST(PageJoin, RecorderJoinsOpWindowsWithPages) {
  auto tracer = std::make_unique<FakePageTracer>();
  FakePageTracer& fake = *tracer;
  RecorderOptions o;
  o.warmup_iterations = 1;
  o.discover_topology = false;
  EventRecorder r(o, std::move(tracer));
  r.start();
  const auto* param = reinterpret_cast<const void*>(kBase);
  const auto* small_tmp = reinterpret_cast<const void*>(kBase + 256);   // same page as the parameter
  const auto* act = reinterpret_cast<const void*>(kBase + 4 * kPage);
  r.alloc(param, 256, -1, 0, true);
  r.mark_iteration(IterationSource::explicit_mark);  // iteration 1 is recorded
  auto op = r.op_begin("fwd", std::vector<const void*>{param});
  r.alloc(act, 2 * kPage, -1, 0, true);
  fake.touch(kBase);                 // reads the parameter
  fake.touch(kBase + 4 * kPage);     // writes the activation
  fake.touch(kBase + 5 * kPage);
  r.op_end(op, std::vector<const void*>{act});
  auto op2 = r.op_begin("tmp");
  r.alloc(small_tmp, 64, -1, 0, true);
  r.op_end(op2, std::vector<const void*>{small_tmp});
  r.free(small_tmp);
  fake.touch(kBase + 4 * kPage);     // between ops: nobody reported using the activation
  auto op3 = r.op_begin("next");
  r.op_end(op3);
  r.mark_iteration(IterationSource::explicit_mark);
  EXPECT_TRUE(fake.tracked.empty());  // everything released at the end of the iteration
  const Profile p = r.finish();
  ASSERT_EQ(p.tensors.size(), 3u);
  const auto& tp = p.tensors[0];
  const auto& ta = p.tensors[1];
  const auto& tt = p.tensors[2];
  EXPECT_EQ(tp.pages_touched, 1u);
  EXPECT_EQ(ta.pages, 2u);
  EXPECT_EQ(ta.pages_touched, 2u);
  EXPECT_EQ(ta.page_touches, 3u);
  EXPECT_TRUE(ta.has(kTensorHiddenAccess));
  EXPECT_FALSE(tp.has(kTensorHiddenAccess));
  // persistent parameter + temporary on one page
  EXPECT_TRUE(tp.has(kTensorFalseShared));
  EXPECT_TRUE(tt.has(kTensorFalseShared));
  EXPECT_EQ(p.meta.page_tracer, "fake");
  bool hidden_page = false, shared_page = false;
  for (const auto& pg : p.pages) {
    hidden_page |= pg.address == kBase + 4 * kPage && pg.hidden_windows == 1;
    shared_page |= pg.address == kBase && pg.false_shared;
  }
  EXPECT_TRUE(hidden_page);
  EXPECT_TRUE(shared_page);
}
