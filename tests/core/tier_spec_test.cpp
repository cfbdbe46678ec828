// Tier models: spec strings (good and bad), JSON files, presets, and what --tiers accepts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/tier_spec.hpp"

using namespace tierpack;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t GiB = 1ull << 30;

std::string error_of(const std::string& spec) {
  try {
    parse_tier_spec(spec);
  } catch (const logic_error& e) {
    return e.what();
  }
  return "";
}

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("tierpack_tiers_" + std::to_string(::getpid()) + "_" + name)).string();
}

}  // namespace

TEST(TierSpec, GpuWithHostOverPcie) {
  const TierModel m = parse_tier_spec("gpu:24G,host:120G@55GB/s");
  ASSERT_EQ(m.tiers.size(), 2u);
  EXPECT_EQ(m.tiers[0].kind, TierKind::gpu);
  EXPECT_EQ(m.tiers[0].name, "gpu0");
  EXPECT_EQ(m.tiers[0].device, 0);
  EXPECT_EQ(m.tiers[0].capacity_bytes, 24 * GiB);
  EXPECT_EQ(m.tiers[0].page_size, 2u << 20);
  EXPECT_EQ(m.tiers[1].kind, TierKind::host_dram);
  EXPECT_EQ(m.tiers[1].capacity_bytes, 120 * GiB);
  EXPECT_FALSE(m.tiers[1].bandwidth_bytes_per_s.has_value());  // the figure is the link's
  ASSERT_NE(m.link(0, 1), nullptr);
  ASSERT_NE(m.link(1, 0), nullptr);
  EXPECT_DOUBLE_EQ(m.link(0, 1)->bandwidth_bytes_per_s, 55e9);
  EXPECT_DOUBLE_EQ(m.link(1, 0)->bandwidth_bytes_per_s, 55e9);
  EXPECT_TRUE(m.link(0, 1)->full_duplex);
}

TEST(TierSpec, DramWithCxlAndRelativeLatency) {
  for (const char* spec : {"dram:16G,cxl:64G@+80ns/36GB/s", "dram:16G+cxl:64G@36GB/s/+80ns"}) {
    SCOPED_TRACE(spec);
    const TierModel m = parse_tier_spec(spec);
    ASSERT_EQ(m.tiers.size(), 2u);
    EXPECT_EQ(m.tiers[0].name, "dram0");
    EXPECT_EQ(m.tiers[1].name, "cxl0");
    EXPECT_EQ(m.tiers[1].kind, TierKind::far_memory);
    EXPECT_EQ(m.tiers[1].capacity_bytes, 64 * GiB);
    EXPECT_DOUBLE_EQ(*m.tiers[1].bandwidth_bytes_per_s, 36e9);
    EXPECT_DOUBLE_EQ(*m.tiers[1].latency_ns, 180.0);  // +80 ns over nominal 100 ns DRAM
    EXPECT_NE(m.tiers[1].source.find("nominal"), std::string::npos);
    ASSERT_NE(m.link(0, 1), nullptr);
    EXPECT_DOUBLE_EQ(m.link(0, 1)->bandwidth_bytes_per_s, 36e9);
    EXPECT_FALSE(m.link(0, 1)->full_duplex);
    EXPECT_EQ(m.tiers[0].numa_node, 0);
    EXPECT_EQ(m.tiers[1].numa_node, 1);
  }
  const TierModel m = parse_tier_spec("dram:16G@90ns/200GB/s+cxl:64G@+80ns/36GB/s+cxl:32G@400ns");
  ASSERT_EQ(m.tiers.size(), 3u);
  EXPECT_DOUBLE_EQ(*m.tiers[1].latency_ns, 170.0);
  EXPECT_EQ(m.tiers[2].name, "cxl1");
  EXPECT_DOUBLE_EQ(*m.tiers[2].latency_ns, 400.0);
  EXPECT_FALSE(m.link(0, 2));  // no bandwidth given: no link figure
}

TEST(TierSpec, NamesDevicesAndSingleTiers) {
  const TierModel m = parse_tier_spec("gpu1:80G,dram:1T");
  EXPECT_EQ(m.tiers[0].name, "gpu1");
  EXPECT_EQ(m.tiers[0].device, 1);
  EXPECT_EQ(m.tiers[1].capacity_bytes, 1024 * GiB);
  EXPECT_TRUE(m.links.empty());
  EXPECT_EQ(parse_tier_spec("dram:1.5G").tiers.size(), 1u);
  const TierModel two = parse_tier_spec("dram:1G,dram:2G");
  EXPECT_EQ(two.tiers[1].name, "dram1");
  EXPECT_EQ(parse_tier_spec("far:8G").tiers[0].kind, TierKind::far_memory);
}

TEST(TierSpec, BadSpecsNameTheBadPart) {
  const std::pair<std::string, std::string> cases[] = {
      {"", "empty"},
      {"dram:16G,,cxl:1G", "empty tier"},
      {"ram:16G", "unknown tier kind 'ram'"},
      {"dram", "missing capacity"},
      {"dram:", "missing capacity"},
      {"dram:16Q", "'16Q'"},
      {"dram:0", "capacity must be positive"},
      {"dram:16G@", "nothing after '@'"},
      {"dram:16G,cxl:64G@fast", "'fast'"},
      {"dram:16G,cxl:64G@36GB/s/40GB/s", "bandwidth given twice"},
      {"dram:16G,cxl:64G@80ns/90ns", "latency given twice"},
      {"dram:16G@+80ns", "needs a tier before it"},
      {"gpu:24G,host:64G@+80ns", "first tier's latency"},
      {"dram0:1G,dram0:2G", "used twice"},
      {"dram:16G,cxl:64G@36GB", "'36GB'"},
      {"dram:16G,cxl:64G@-3GB/s", "'-3GB/s'"},
      {"9dram:1G", "must be a kind"},
      {"gpu99999999999:1G", "out of range"},  // found writing tests/fuzz/fuzz_tier_spec: was std::out_of_range
  };
  for (const auto& [spec, expected] : cases) {
    SCOPED_TRACE(spec);
    const std::string msg = error_of(spec);
    EXPECT_NE(msg.find("invalid tier spec"), std::string::npos) << msg;
    EXPECT_NE(msg.find(expected), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
  }
}

TEST(TierSpec, ALongBadSpecIsNotEchoedWhole) {
  // Issue 26: a 10 KB bad spec was echoed whole in the one-line error.
  const std::string spec = "dram:16G,cxl:" + std::string(10000, '9') + "Q";
  const std::string msg = error_of(spec);
  EXPECT_LT(msg.size(), 400u) << msg;
  EXPECT_NE(msg.find("characters)"), std::string::npos) << msg;
}

TEST(TierModelFile, RoundTripsThroughTopoJson) {
  const TierModel m = parse_tier_spec("gpu:24G,host:120G@55GB/s");
  const std::string path = temp_path("model.json");
  std::ofstream(path) << nlohmann::json(m).dump(2);
  EXPECT_EQ(read_tier_model(path), m);
  EXPECT_EQ(load_tier_model(path), m);
  fs::remove(path);

  const std::string bad = temp_path("bad.json");
  std::ofstream(bad) << R"({"tiers": [{"id": 0, "kind": "gpu", "name": "g", "capacity_bytes": 0}]})";
  try {
    read_tier_model(bad);
    ADD_FAILURE() << "accepted a tier without capacity";
  } catch (const format_error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("no capacity"), std::string::npos);
  }
  std::ofstream(bad) << "[1, 2]";
  EXPECT_THROW(read_tier_model(bad), format_error);
  std::ofstream(bad) << "{not json";
  EXPECT_THROW(read_tier_model(bad), format_error);
  fs::remove(bad);
}

TEST(TierPresets, EveryPresetLoadsAndSaysWhereItsFiguresComeFrom) {
  const auto names = tier_preset_names();
  for (const char* expected : {"ddr5-cxl", "ddr5-local", "ddr5-remote-socket", "h200-pcie"})
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    const TierModel m = tier_preset(name);
    EXPECT_NO_THROW(validate_tier_model(m));
    EXPECT_FALSE(tier_preset_description(name).empty());
    for (const auto& t : m.tiers) EXPECT_FALSE(t.source.empty());
    for (const auto& l : m.links) EXPECT_FALSE(l.source.empty());
    EXPECT_EQ(load_tier_model("preset:" + name), m);
  }
  const TierModel h200 = tier_preset("h200-pcie");
  ASSERT_NE(h200.link(0, 1), nullptr);
  EXPECT_DOUBLE_EQ(h200.link(0, 1)->bandwidth_bytes_per_s, 55e9);
  EXPECT_DOUBLE_EQ(h200.link(0, 1)->both_ways_bytes_per_s, 100e9);
  const TierModel cxl = tier_preset("ddr5-cxl");
  EXPECT_DOUBLE_EQ(*cxl.tiers[1].latency_ns - *cxl.tiers[0].latency_ns, 80.0);
  EXPECT_DOUBLE_EQ(*cxl.tiers[1].bandwidth_bytes_per_s, 36e9);
}

TEST(TierModelArgument, ResolvesPresetsFilesAndSpecs) {
  EXPECT_EQ(load_tier_model("dram:16G,cxl:64G@36GB/s"), parse_tier_spec("dram:16G,cxl:64G@36GB/s"));
  try {
    load_tier_model("preset:nope");
    ADD_FAILURE();
  } catch (const logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("h200-pcie"), std::string::npos);  // lists the known ones
  }
  try {
    load_tier_model("nonsense");
    ADD_FAILURE();
  } catch (const logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("neither a tier spec"), std::string::npos);
  }
}
