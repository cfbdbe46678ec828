// A 100k-tensor profile: the report stays within the size budget of docs/report.md ("Size budget"):
// index.html under 2 MiB whatever the profile, trace and snapshot linear in its size; the big
// files are still well-formed. No timing here (bench/report/report_bench.cpp measures speed).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/file_envelope.hpp"
#include "report/report_writer.hpp"
#include "tests/report/report_fixtures.hpp"

using namespace tierpack;
using namespace tierpack::report;
using namespace tierpack::report::testing;

namespace {

constexpr std::uint64_t kHtmlBudget = 2ull << 20;
constexpr std::uint64_t kTraceBytesPerTensorAndOp = 1024;
constexpr std::uint64_t kSnapshotJsonBytesPerTensor = 640;
constexpr std::uint64_t kSnapshotPickleBytesPerTensor = 512;

TEST(LargeProfile, ReportStaysWithinItsSizeBudget) {
  FixtureOptions o;
  o.layers = 7200;  // ~100k tensors, ~72k ops
  const Profile p = make_training_profile(o);
  ASSERT_GE(p.tensors.size(), 100000u);
  const Plan plan = make_plan(p, p.peak_bytes(0) / 2);
  const RunStats run = make_run_stats(p, plan);
  ReportInputs in;
  in.profile = &p;
  in.plan = &plan;
  in.run_stats = &run;
  const auto dir = scratch_dir("large");
  const auto result = write_report(in, {}, dir);
  ASSERT_EQ(result.files.size(), 4u);
  std::map<std::string, std::uint64_t> size;
  for (const auto& f : result.files) {
    size[std::filesystem::path(f.path).filename().string()] = f.bytes;
    EXPECT_EQ(std::filesystem::file_size(f.path), f.bytes) << f.path;
    std::printf("  %-24s %10.2f MiB  %.2f s\n", std::filesystem::path(f.path).filename().c_str(),
                static_cast<double>(f.bytes) / (1 << 20), f.seconds);
  }
  const std::uint64_t n = p.tensors.size(), ops = p.ops.size();
  EXPECT_LE(size["index.html"], kHtmlBudget);
  EXPECT_LE(size["trace.json"], kTraceBytesPerTensorAndOp * (n + ops));
  EXPECT_LE(size["memory_snapshot.json"], kSnapshotJsonBytesPerTensor * n);
  EXPECT_LE(size["memory_snapshot.pickle"], kSnapshotPickleBytesPerTensor * n);

  // The page's embedded data is bounded by the options, not by the profile.
  const std::string html = read_file(dir + "/index.html");
  const std::string open = "<script type=\"application/json\" id=\"report-data\">";
  const auto b = html.find(open), e = html.find("</script>", b);
  const auto d = nlohmann::json::parse(html.substr(b + open.size(), e - b - open.size()));
  const ReportOptions defaults;
  for (const auto& c : d["memory"]) EXPECT_LE(c["t"].size(), defaults.max_series_points + 1);
  EXPECT_LE(d["lifetimes"]["rows"].size(), defaults.lifetime_rows);
  for (const auto& pm : d["pagemaps"]) EXPECT_LE(pm["cells"].get<std::string>().size(), defaults.page_map_cells);
  for (const auto& r : d["migrations"]) EXPECT_LE(r["items"].size(), defaults.max_migration_items);
  EXPECT_LE(d["groups"]["cells"].size(), defaults.page_map_cells);

  // The big files are well-formed (validated without building them in memory).
  for (const char* f : {"trace.json", "memory_snapshot.json"}) {
    std::ifstream in_file(dir + "/" + f);
    EXPECT_TRUE(nlohmann::json::accept(in_file)) << f;
  }
  const std::string pickle = read_file(dir + "/memory_snapshot.pickle");
  ASSERT_GT(pickle.size(), 2u);
  EXPECT_EQ(pickle.substr(0, 2), std::string("\x80\x04", 2));
  EXPECT_EQ(pickle.back(), '.');
  std::filesystem::remove_all(dir);
}

}  // namespace
