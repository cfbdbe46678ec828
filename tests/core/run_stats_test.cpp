// Note [Run counters]: one definition per counter, summed once (run_counters), read back from files of
// either runtime; a host run's stall time is "not measured", never 0 ns (issue 26, counters that disagree).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/run_stats.hpp"

using namespace tierpack;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("tierpack_run_stats_" + std::to_string(::getpid()) + "_" + name)).string();
}

RunIteration iteration(std::int32_t index, std::uint32_t late, std::uint64_t stall_ns, std::uint64_t fallbacks,
                       std::uint64_t fast_peak) {
  RunIteration it;
  it.index = index;
  it.step_ns = 1000000;
  it.bytes_to_fast = 4096;
  it.bytes_to_slow = 8192;
  it.stalls = late;
  it.stall_ns = stall_ns;
  it.budget_fallbacks = fallbacks;
  it.fast_peak_bytes = fast_peak;
  return it;
}

}  // namespace

TEST(RunCounters, SumTheIterationsWithOneDefinitionEach) {
  RunStats s;
  s.source = "tierpack run";
  s.stall_ns_measured = false;
  s.fast_budget_bytes = 4096;
  s.iterations = {iteration(2, 10, 0, 0, 13 << 10), iteration(3, 8, 0, 2, 8 << 10)};
  const RunCounters c = run_counters(s);
  EXPECT_EQ(c.iterations, 2u);
  EXPECT_EQ(c.late_prefetches, 18u);
  EXPECT_EQ(c.bytes_to_fast, 8192u);
  EXPECT_EQ(c.bytes_to_slow, 16384u);
  EXPECT_EQ(c.budget_fallbacks, 2u);
  EXPECT_EQ(c.fast_peak_bytes, 13u << 10);
  // The issue's case: a 13 KiB fast peak under a 4 KiB budget is 9 KiB over, whatever the fallbacks say.
  EXPECT_EQ(c.over_budget_bytes(), 9u << 10);
  EXPECT_EQ(c.late_text(), "18 late prefetch(es), stall time not measured (the runtime does not wait for moves)");

  s.stall_ns_measured = true;  // a runtime that waits (the GPU tier)
  s.iterations[0].stall_ns = 1500000;
  EXPECT_EQ(run_counters(s).late_text(), "18 late prefetch(es), 1.50 ms waiting for them");
  s.fast_budget_bytes = 0;
  EXPECT_EQ(run_counters(s).over_budget_bytes(), 0u) << "no budget known: nothing is over it";
}

TEST(RunCounters, RoundTripAndOldHostFilesHaveNoStallTime) {
  RunStats s;
  s.source = "tierpack run";
  s.stall_ns_measured = false;
  s.profile_id = "0123456789abcdef";
  s.iterations = {iteration(2, 1, 0, 3, 65536)};
  const std::string path = temp_path("rt.json");
  write_run_stats(s, path);
  EXPECT_EQ(read_run_stats(path), s);
  // Written before stall_ns_measured and the new counters: a host run's file says "stalls: N, stall_ns: 0",
  // which was never a measurement; another runtime's stall_ns was.
  std::ofstream(path, std::ios::trunc)
      << R"({"format": "tierpack-run-stats", "version": 1, "source": "tierpack run", "iterations": [{"index": 2, "stalls": 18, "stall_ns": 0}]})";
  EXPECT_FALSE(read_run_stats(path).stall_ns_measured);
  EXPECT_EQ(read_run_stats(path).profile_id, "") << "identity unknown";
  std::ofstream(path, std::ios::trunc)
      << R"j({"format": "tierpack-run-stats", "version": 1, "source": "tierpack gpu runtime (gpu0)", "iterations": [{"index": 2, "stalls": 1, "stall_ns": 5}]})j";
  EXPECT_TRUE(read_run_stats(path).stall_ns_measured);
  fs::remove(path);
}

// Note [Tiers this machine lacks]: the emulated tiers of a run are read back, from the key or from an
// older file's tierpack_run object; a wrong type names the field.
TEST(RunStatsFile, EmulatedTiersAreReadBack) {
  RunStats s;
  s.source = "tierpack run";
  s.iterations = {iteration(1, 0, 0, 0, 0)};
  s.emulated_tiers = {"cxl0 (NUMA node 1)"};
  const std::string path = temp_path("emulated.json");
  write_run_stats(s, path);
  EXPECT_EQ(read_run_stats(path).emulated_tiers, s.emulated_tiers);
  {
    std::ofstream(path) << R"J({"format": "tierpack-run-stats", "version": 1, "source": "tierpack run", "iterations": [],
                              "tierpack_run": {"emulated_tiers": ["cxl0 (NUMA node 1)"]}})J";
  }
  EXPECT_EQ(read_run_stats(path).emulated_tiers, s.emulated_tiers);
  {
    std::ofstream(path) << R"J({"format": "tierpack-run-stats", "version": 1, "iterations": [], "emulated_tiers": [3]})J";
  }
  try {
    (void)read_run_stats(path);
    ADD_FAILURE() << "a number as a tier name was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("emulated_tiers"), std::string::npos) << e.what();
  }
  fs::remove(path);
}
