// Classification into lifetime classes, and packing into page groups.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "placer/classify.hpp"
#include "placer/pack.hpp"
#include "placer/page_stats.hpp"
#include "tests/placer/hand_profile.hpp"
#include "tests/support/synthetic_profile.hpp"

using namespace tierpack;
using namespace tierpack::placer;
using tierpack::test::HandProfile;

namespace {

constexpr std::uint64_t KiB = 1024, MiB = 1024 * 1024;

// Checks that no two live things overlap: tensors inside a group, groups in the address space.
void expect_no_overlap(const Profile& p, const Classification& c, const Packing& k) {
  const auto n = static_cast<OpIndex>(p.ops.size());
  std::vector<const TensorInfo*> info(p.tensors.size(), nullptr);
  for (const auto& t : c.tensors) info[t.id] = &t;
  auto life = [&](const TensorInfo& t) {
    return std::pair(t.birth == kBeforeIteration ? -1 : t.birth, t.death == kAfterIteration ? n : t.death);
  };
  for (std::size_t a = 0; a < k.placements.size(); ++a)
    for (std::size_t b = a + 1; b < k.placements.size(); ++b) {
      const auto &x = k.placements[a], &y = k.placements[b];
      if (x.group != y.group) continue;
      const auto [xb, xd] = life(*info[x.tensor]);
      const auto [yb, yd] = life(*info[y.tensor]);
      if (xd < yb || yd < xb) continue;
      const bool apart = x.offset_in_group + x.bytes <= y.offset_in_group || y.offset_in_group + y.bytes <= x.offset_in_group;
      EXPECT_TRUE(apart) << "tensors " << x.tensor << " and " << y.tensor << " overlap in group " << x.group;
    }
  for (std::size_t a = 0; a < k.groups.size(); ++a) {
    const auto& pl = k.placements;
    for (const auto& x : pl)
      if (x.group == a) {
        EXPECT_LE(x.offset_in_group + x.bytes, k.groups[a].bytes);
      }
    for (std::size_t b = a + 1; b < k.groups.size(); ++b) {
      const auto &ga = k.groups[a], &gb = k.groups[b];
      const OpIndex ab = k.lives[a].exists_at_start() ? -1 : k.lives[a].birth, ad = k.lives[a].exists_at_end() ? n : k.lives[a].death;
      const OpIndex bb = k.lives[b].exists_at_start() ? -1 : k.lives[b].birth, bd = k.lives[b].exists_at_end() ? n : k.lives[b].death;
      if (ad < bb || bd < ab) continue;
      EXPECT_TRUE(ga.offset + ga.bytes <= gb.offset || gb.offset + gb.bytes <= ga.offset) << "groups " << a << " and " << b;
    }
  }
}

}  // namespace

TEST(Classify, SortsTensorsIntoLifetimeClasses) {
  HandProfile h(20);  // ops 0..9 forward, 10..19 backward
  const auto param = h.tensor(4 * KiB, kBeforeIteration, kAfterIteration, {1, 15}, kTensorParameter);
  const auto grad = h.tensor(4 * KiB, 12, kAfterIteration, {12, 19});
  const auto old = h.tensor(4 * KiB, kBeforeIteration, 3, {0});
  const auto temp = h.tensor(4 * KiB, 4, 5, {4, 5});
  const auto saved = h.tensor(4 * KiB, 2, 8, {2, 8}, kTensorSavedForBackward);
  const auto fwd_bwd = h.tensor(4 * KiB, 3, 16, {3, 16});
  const auto iter = h.tensor(4 * KiB, 1, 9, {1, 5, 9});
  const Profile p = h.done();
  EXPECT_EQ(classify_tensor(p, p.tensors[param]), TensorClass::persistent);
  EXPECT_EQ(classify_tensor(p, p.tensors[grad]), TensorClass::persistent);
  EXPECT_EQ(classify_tensor(p, p.tensors[old]), TensorClass::persistent);
  EXPECT_EQ(classify_tensor(p, p.tensors[temp]), TensorClass::temporary);
  EXPECT_EQ(classify_tensor(p, p.tensors[saved]), TensorClass::activation);
  EXPECT_EQ(classify_tensor(p, p.tensors[fwd_bwd]), TensorClass::activation);
  EXPECT_EQ(classify_tensor(p, p.tensors[iter]), TensorClass::iteration);

  const Classification c = classify(p, -1);
  ASSERT_EQ(c.tensors.size(), 7u);
  const auto& it = c.tensors[iter];
  EXPECT_EQ(it.accesses, 3u);
  EXPECT_DOUBLE_EQ(it.reuse_interval_ns, 4e6);  // uses at 1, 5, 9 ms
  EXPECT_EQ(c.tensors[grad].uses.front(), 12);  // its birth counts as a use
  EXPECT_EQ(c.count_per_class[static_cast<int>(TensorClass::persistent)], 3u);
  EXPECT_EQ(classify(p, 0).tensors.size(), 0u);  // other devices are left out
}

TEST(Pack, PageAwareGroupsHoldOneClassAndLargeTensorsGetTheirOwn) {
  synth::SyntheticOptions so;
  so.tensors = 600;
  so.device = -1;
  so.activation_bytes = 48 * KiB;
  so.param_bytes = 32 * KiB;
  so.small_max_bytes = 16 * KiB;
  const Profile p = synth::make_synthetic_profile(so);
  const Classification c = classify(p, -1);
  PackOptions o;
  o.page_size = 4096;
  o.group_bytes = 2 * MiB;
  const Packing aware = pack(p, c, o);
  o.policy = PackPolicy::allocation_order;
  const Packing agnostic = pack(p, c, o);
  expect_no_overlap(p, c, aware);
  expect_no_overlap(p, c, agnostic);

  auto mixed_groups = [&](const Packing& k) {
    std::vector<std::set<TensorClass>> classes(k.groups.size());
    for (const auto& pl : k.placements) classes[pl.group].insert(pl.cls);
    return std::count_if(classes.begin(), classes.end(), [](const auto& s) { return s.size() > 1; });
  };
  EXPECT_EQ(mixed_groups(aware), 0);
  EXPECT_GT(mixed_groups(agnostic), 0);
  for (const auto& g : aware.groups) {
    EXPECT_EQ(g.bytes % 4096, 0u);
    EXPECT_LE(g.bytes, 2 * MiB);
  }
  EXPECT_EQ(aware.placements.size(), c.tensors.size());
  EXPECT_TRUE(std::is_sorted(aware.placements.begin(), aware.placements.end(),
                             [](const TensorPlacement& a, const TensorPlacement& b) { return a.seq < b.seq; }));

  // A large tensor gets a run of pages of its own.
  HandProfile h(4);
  const auto big = h.tensor(3 * MiB + 5, 0, 3, {0, 3});
  h.tensor(100, 0, 3, {0, 3});
  h.tensor(200, 1, 2, {1, 2});
  const Profile q = h.done();
  const Classification cq = classify(q, -1);
  o.policy = PackPolicy::page_aware;
  const Packing k = pack(q, cq, o);
  const auto& pl = *std::find_if(k.placements.begin(), k.placements.end(), [&](const auto& x) { return x.tensor == big; });
  EXPECT_EQ(k.groups[pl.group].tensors, std::vector<TensorId>{big});
  EXPECT_EQ(k.groups[pl.group].bytes, 3 * MiB + 4096);
}

TEST(Pack, HiddenAccessTensorsGoToPinnedGroups) {
  HandProfile h(4);
  const auto hidden = h.tensor(1000, 0, 3, {0, 3}, kTensorHiddenAccess);
  const auto normal = h.tensor(1000, 0, 3, {0, 3});
  const Profile p = h.done();
  const Classification c = classify(p, -1);
  const Packing k = pack(p, c, {});
  GroupId gh = 0, gn = 0;
  for (const auto& pl : k.placements) (pl.tensor == hidden ? gh : gn) = pl.group;
  (void)normal;
  EXPECT_NE(gh, gn);
  EXPECT_TRUE(k.groups[gh].pinned);
  EXPECT_FALSE(k.groups[gn].pinned);
}

TEST(Pack, ReleasesEmptyGroupsAndReusesFreedSpace) {
  // Temporaries one after another reuse the space of those already freed.
  HandProfile h(10);
  for (int i = 0; i < 10; ++i) h.tensor(64 * KiB, i, i, {i});
  const Profile p = h.done();
  const Classification c = classify(p, -1);
  PackOptions o;
  const Packing k = pack(p, c, o);
  // Each temporary dies before the next is born: every group is released and a new one opened,
  // and the address space needs room for one group only.
  EXPECT_EQ(k.groups.size(), 10u);
  EXPECT_EQ(k.address_space_bytes, 2 * MiB);
  for (const auto& g : k.groups) EXPECT_EQ(g.offset, 0u);
}

TEST(PageStats, CountsPagesHoldingLiveTensorsOfDifferentClasses) {
  std::vector<Extent> e = {
      {0, 100, TensorClass::temporary, 0, 1},
      {100, 100, TensorClass::activation, 0, 5},      // shares page 0 with the temporary, both live at ops 0-1
      {4096, 100, TensorClass::activation, 0, 5},
      {4196, 100, TensorClass::activation, 2, 3},     // same class: not mixed
      {8192, 100, TensorClass::persistent, -1, 9},
      {8292, 100, TensorClass::temporary, 7, 7},      // mixed, live at op 7
      {12288, 100, TensorClass::persistent, 0, 1},
      {12388, 100, TensorClass::temporary, 2, 3},     // same page, but never live together
  };
  EXPECT_EQ(count_mixed_class_pages(e, 4096), 2u);
  EXPECT_EQ(count_mixed_class_pages(e, 1 << 20), 1u);
  EXPECT_EQ(count_mixed_class_pages({}, 4096), 0u);
}
