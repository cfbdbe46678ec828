#include "core/discovery/topology_discovery.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

using namespace tierpack;

namespace {
std::string data(const char* name) { return std::string(TIERPACK_SOURCE_DIR) + "/tests/data/topology/" + name; }
}  // namespace

TEST(TopologyDiscovery, LiveMachineHasAHostTier) {
  const Topology t = discover_topology({.hwloc_xml = {}, .gpus = false});
  ASSERT_FALSE(t.tiers.empty());
  EXPECT_FALSE(t.of_kind(TierKind::host_dram).empty());
  for (const auto& tier : t.tiers) EXPECT_GT(tier.capacity_bytes, 0u) << tier.name;
}

TEST(TopologyDiscovery, TwoSocketMachineHasTwoDramTiers) {
  const Topology t = discover_topology({.hwloc_xml = data("two_socket.xml"), .gpus = true});
  ASSERT_EQ(t.tiers.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(t.tiers[i].kind, TierKind::host_dram);
    EXPECT_EQ(t.tiers[i].numa_node, i);
    EXPECT_EQ(t.tiers[i].capacity_bytes, 16ull << 30);
  }
  EXPECT_TRUE(t.of_kind(TierKind::far_memory).empty());
  EXPECT_TRUE(t.of_kind(TierKind::gpu).empty()) << "XML topologies never probe GPUs";
}

TEST(TopologyDiscovery, CpuLessNodeIsFarMemoryWithHmatFigures) {
  const Topology t = discover_topology({.hwloc_xml = data("cxl_expander.xml"), .gpus = false});
  ASSERT_EQ(t.tiers.size(), 2u);
  const Tier& dram = t.tiers[0];
  const Tier& cxl = t.tiers[1];
  EXPECT_EQ(dram.kind, TierKind::host_dram);
  EXPECT_EQ(dram.capacity_bytes, 16ull << 30);
  EXPECT_EQ(cxl.kind, TierKind::far_memory);
  EXPECT_EQ(cxl.name, "cxl1");
  EXPECT_EQ(cxl.capacity_bytes, 64ull << 30);
  ASSERT_TRUE(cxl.latency_ns && dram.latency_ns);
  EXPECT_DOUBLE_EQ(*cxl.latency_ns, 250.0);
  EXPECT_DOUBLE_EQ(*dram.latency_ns, 100.0);
  ASSERT_TRUE(cxl.bandwidth_bytes_per_s && dram.bandwidth_bytes_per_s);
  EXPECT_LT(*cxl.bandwidth_bytes_per_s, *dram.bandwidth_bytes_per_s);
  EXPECT_EQ(*t.fast_tier(), dram.id);
}

TEST(TopologyDiscovery, BadXmlIsLogicError) {
  EXPECT_THROW(discover_topology({.hwloc_xml = "/nonexistent.xml", .gpus = false}), logic_error);
  EXPECT_THROW(discover_topology({.hwloc_xml = data("../../core/units_test.cpp"), .gpus = false}), logic_error);
}
