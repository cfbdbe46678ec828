#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/plan.hpp"

using namespace tierpack;
namespace fs = std::filesystem;

namespace {

Plan small_plan() {
  Plan p;
  Tier gpu;
  gpu.kind = TierKind::gpu;
  gpu.name = "gpu0";
  gpu.device = 0;
  gpu.capacity_bytes = 24ull << 30;
  gpu.page_size = 2 << 20;
  Tier host;
  host.kind = TierKind::host_dram;
  host.name = "dram0";
  host.capacity_bytes = 64ull << 30;
  p.fast_tier = p.topology.add(gpu);
  p.slow_tier = p.topology.add(host);
  p.topology.links.push_back({0, 1, 55e9, true, "measured"});
  p.fast_budget_bytes = 8ull << 30;
  PageGroup g;
  g.id = 0;
  g.cls = TensorClass::activation;
  g.home = 0;
  g.bytes = 4 << 20;
  g.page_size = 2 << 20;
  g.tensors = {0, 1};
  g.first_use = 0;
  g.last_use = 9;
  p.groups.push_back(g);
  p.placements.push_back({0, 0, 0x7f0000000000, 1 << 20, TensorClass::activation, 0, 0});
  p.placements.push_back({1, 1, 0, 1 << 20, TensorClass::activation, 0, 1 << 20});
  p.schedule.push_back({0, MoveKind::evict, 0, 1, 4 << 20, 2, kAfterIteration, 10, 90});
  p.schedule.push_back({0, MoveKind::prefetch, 1, 0, 4 << 20, 5, 9, 100, 180});
  p.prediction.fast_peak_bytes = 8ull << 30;
  p.prediction.step_ns = 1e6;
  p.notes.push_back("test plan");
  return p;
}

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("tierpack_plan_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::string error_of_text(const std::string& text) {
  const std::string path = temp_path("bad.json");
  std::ofstream(path) << text;
  try {
    read_plan(path);
  } catch (const error& e) {
    fs::remove(path);
    return e.what();
  }
  fs::remove(path);
  return "";
}

}  // namespace

TEST(PlanIo, RoundTrips) {
  const Plan p = small_plan();
  const std::string path = temp_path("rt.json");
  write_plan(p, path);
  EXPECT_EQ(read_plan(path), p);
  fs::remove(path);
}

TEST(PlanIo, RejectsBadFiles) {
  EXPECT_NE(error_of_text("").find("invalid plan"), std::string::npos);
  EXPECT_NE(error_of_text("{\"format\": \"tierpack-plan\", \"version\": 7}").find("newer"), std::string::npos);
  EXPECT_NE(error_of_text("{\"version\": 1}").find("not a tierpack plan"), std::string::npos);
  EXPECT_NE(error_of_text("[1,2,3").find("invalid plan"), std::string::npos);
}

TEST(PlanIo, RejectsInconsistentPlans) {
  Plan p = small_plan();
  p.schedule[0].group = 5;
  EXPECT_THROW(p.validate(), format_error);
  p = small_plan();
  p.placements[1].offset_in_group = 4 << 20;
  EXPECT_THROW(p.validate(), format_error);
  p = small_plan();
  p.groups[0].bytes = 3 << 20;  // not a multiple of 2 MiB
  EXPECT_THROW(p.validate(), format_error);
  p = small_plan();
  p.schedule[1].to = 1;
  EXPECT_THROW(p.validate(), format_error);
}

TEST(PlanIo, RejectsNumbersThatDoNotFitTheirField) {
  // Found by tests/fuzz: nlohmann converts numbers with static_cast (wrapping integers, undefined
  // behaviour for floating values out of range); core reads them checked (detail::read).
  const std::string good = nlohmann::json(small_plan()).dump();
  auto with = [&](const char* key, const nlohmann::json& value) {
    auto j = nlohmann::json::parse(good);
    j[key] = value;
    try {
      parse_plan(j.dump(), "plan.json");
    } catch (const format_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(with("fast_tier", 3.3e47).find("out of range"), std::string::npos);
  EXPECT_NE(with("fast_tier", 70000).find("out of range"), std::string::npos);
  EXPECT_NE(with("fast_tier", -1).find("out of range"), std::string::npos);
  EXPECT_NE(with("fast_tier", 0.5).find("out of range"), std::string::npos);
  EXPECT_NE(with("fast_budget_bytes", 5.6e19).find("out of range"), std::string::npos);
  EXPECT_EQ(with("fast_budget_bytes", 1024.0), "");  // a whole number written as a float is fine
  EXPECT_EQ(parse_plan(good, "plan.json"), small_plan());
}
