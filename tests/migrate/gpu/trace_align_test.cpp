// align_traces: uses observed under an op observer carried over to the unobserved iteration.
#include "migrate/gpu/trace_align.hpp"

#include <gtest/gtest.h>

namespace tierpack::gpu {
namespace {

// Builds a trace from a list of (alloc?, tensor bytes) with each tensor freed where listed.
struct Builder {
  IterationTrace t;
  std::uint32_t alloc(std::uint64_t bytes, std::int64_t seq) {
    TracedTensor x;
    x.seq = seq;
    x.bytes = bytes;
    x.birth = static_cast<std::int64_t>(t.events.size()) + 1;
    t.tensors.push_back(x);
    const auto id = static_cast<std::uint32_t>(t.tensors.size() - 1);
    t.events.push_back({true, id});
    return id;
  }
  void free(std::uint32_t id) {
    t.events.push_back({false, id});
    t.tensors[id].death = static_cast<std::int64_t>(t.events.size());
  }
  std::int64_t clock() const { return static_cast<std::int64_t>(t.events.size()); }
};

TEST(TraceAlign, CarriesUsesOverExtraObservedAllocations) {
  // Observed: a, extra, b, free extra, c ; reference: a, b, c. Uses of b and c must land on the
  // reference clock.
  Builder o, r;
  const auto oa = o.alloc(100, 0);
  const auto ox = o.alloc(7, 1);
  const auto ob = o.alloc(200, 2);
  o.t.tensors[ob].uses.push_back({o.clock(), o.clock()});  // used right after its birth (clock 3)
  o.free(ox);
  const auto oc = o.alloc(300, 3);
  o.t.tensors[oc].uses.push_back({o.clock(), o.clock()});  // clock 5
  o.t.tensors[oa].uses.push_back({o.clock(), o.clock()});
  o.t.clock_end = o.clock();
  const auto ra = r.alloc(100, 0);
  const auto rb = r.alloc(200, 1);
  const auto rc = r.alloc(300, 2);
  r.t.clock_end = r.clock();
  AlignmentStats st;
  const IterationTrace out = align_traces(o.t, r.t, &st);
  EXPECT_EQ(st.matched_events, 3u);
  ASSERT_EQ(out.tensors[rb].uses.size(), 1u);
  EXPECT_EQ(out.tensors[rb].uses[0].from, 2);  // b's allocation is reference event 2
  ASSERT_EQ(out.tensors[rc].uses.size(), 1u);
  EXPECT_EQ(out.tensors[rc].uses[0].from, 3);
  EXPECT_EQ(out.tensors[ra].uses.size(), 1u);
  EXPECT_EQ(st.unmatched_tensors, 0u);
}

TEST(TraceAlign, TensorsWithoutCounterpartNeverMove) {
  Builder o, r;
  const auto seen = o.alloc(100, 0);
  o.t.tensors[seen].uses.push_back({1, 1});
  const auto unseen = o.alloc(50, 1);  // allocated, never touched by an observed op (a workspace)
  o.t.clock_end = o.clock();
  r.alloc(100, 0);
  const auto r_unseen = r.alloc(50, 1);
  const auto extra = r.alloc(999, 2);
  r.t.clock_end = r.clock();
  AlignmentStats st;
  const IterationTrace out = align_traces(o.t, r.t, &st);
  EXPECT_EQ(st.unmatched_tensors, 2u);
  (void)unseen;
  ASSERT_EQ(out.tensors[r_unseen].uses.size(), 1u);
  EXPECT_EQ(out.tensors[r_unseen].uses[0].to, out.clock_end);
  ASSERT_EQ(out.tensors[extra].uses.size(), 1u);
  EXPECT_EQ(out.tensors[extra].uses[0].from, out.tensors[extra].birth);
  EXPECT_EQ(out.tensors[extra].uses[0].to, out.clock_end);
}

}  // namespace
}  // namespace tierpack::gpu

namespace tierpack::gpu {
namespace {

// Property: the alignment is a longest common subsequence (checked against dynamic programming on
// random sequences with a few inserted and deleted events).
TEST(TraceAlign, MatchesALongestCommonSubsequence) {
  std::uint64_t seed = 12345;
  auto rnd = [&] { return seed = seed * 6364136223846793005ull + 1442695040888963407ull, seed >> 33; };
  for (int round = 0; round < 200; ++round) {
    std::vector<std::uint64_t> base;
    const int n = 5 + static_cast<int>(rnd() % 60);
    for (int i = 0; i < n; ++i) base.push_back(1 + rnd() % 4);
    auto mutate = [&](std::vector<std::uint64_t> v) {
      for (int e = static_cast<int>(rnd() % 6); e > 0; --e) {
        if (rnd() % 2 && !v.empty()) v.erase(v.begin() + static_cast<std::ptrdiff_t>(rnd() % v.size()));
        else v.insert(v.begin() + static_cast<std::ptrdiff_t>(rnd() % (v.size() + 1)), 1 + rnd() % 4);
      }
      return v;
    };
    const auto x = mutate(base), y = mutate(base);
    IterationTrace a, b;
    for (auto s : x) {
      a.tensors.push_back(TracedTensor{static_cast<std::int64_t>(a.tensors.size()), 0, s, 0, 0, 0, -1, {}});
      a.events.push_back({true, static_cast<std::uint32_t>(a.tensors.size() - 1)});
    }
    for (auto s : y) {
      b.tensors.push_back(TracedTensor{static_cast<std::int64_t>(b.tensors.size()), 0, s, 0, 0, 0, -1, {}});
      b.events.push_back({true, static_cast<std::uint32_t>(b.tensors.size() - 1)});
    }
    a.clock_end = static_cast<std::int64_t>(x.size());
    b.clock_end = static_cast<std::int64_t>(y.size());
    std::vector<std::vector<int>> dp(x.size() + 1, std::vector<int>(y.size() + 1, 0));
    for (std::size_t i = 1; i <= x.size(); ++i)
      for (std::size_t j = 1; j <= y.size(); ++j)
        dp[i][j] = x[i - 1] == y[j - 1] ? dp[i - 1][j - 1] + 1 : std::max(dp[i - 1][j], dp[i][j - 1]);
    AlignmentStats st;
    align_traces(a, b, &st);
    ASSERT_EQ(st.matched_events, static_cast<std::size_t>(dp[x.size()][y.size()])) << "round " << round;
  }
}

}  // namespace
}  // namespace tierpack::gpu
