// memory_snapshot.json: the PyTorch snapshot schema, self-consistent (every free has an alloc, no
// address allocated twice at once, blocks tile their segments, the trace ends in the segments'
// state), with tier and class under extra keys; memory_snapshot.pickle holds the same dictionary.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/file_envelope.hpp"
#include "report/memory_snapshot.hpp"
#include "report/summary.hpp"
#include "tests/report/format_checks.hpp"
#include "tests/report/report_fixtures.hpp"

using namespace tierpack;
using namespace tierpack::report;
using namespace tierpack::report::testing;
using nlohmann::json;

namespace {

ReportModel model_of(const Profile& p) {
  ReportInputs in;
  in.profile = &p;
  return build_model(in, {});
}

TEST(MemorySnapshot, ProfiledAddressesAreKeptAndConsistent) {
  const Profile p = make_training_profile();
  const auto m = model_of(p);
  const auto snap = build_snapshot(m);
  const auto j = json::parse(snapshot_json(m, snap));
  const auto problems = check_snapshot(j);
  EXPECT_TRUE(problems.empty()) << problems.front();
  // gpu0 is trace 0, the host trace 1.
  ASSERT_EQ(j["device_traces"].size(), 2u);
  EXPECT_EQ(j["tierpack"]["devices"][0]["name"], "gpu0");
  EXPECT_EQ(j["tierpack"]["devices"][0]["addresses"], "profiled");
  EXPECT_EQ(j["tierpack"]["devices"][1]["name"], "host");
  std::size_t allocs = 0, gpu_tensors = 0;
  for (const auto& e : j["device_traces"][0]) {
    if (e["action"] != "alloc") continue;
    ++allocs;
    const auto& t = p.tensors[e["tierpack_tensor"].get<std::size_t>()];
    EXPECT_EQ(e["addr"].get<std::uint64_t>(), t.address);
    EXPECT_EQ(e["size"].get<std::uint64_t>(), t.bytes);
    EXPECT_EQ(e["tierpack_tier"], "gpu0");
    EXPECT_EQ(e["category"], std::string(to_string(m.classes[t.id])));
    ASSERT_EQ(e["frames"].size(), 1u);
  }
  for (const auto& t : p.tensors) gpu_tensors += t.device == 0;
  EXPECT_EQ(allocs, gpu_tensors);
  EXPECT_EQ(j["device_traces"][0].back()["action"], "snapshot");
  EXPECT_EQ(j["device_traces"][0].back()["category"], "unknown");
}

TEST(MemorySnapshot, MissingAddressesGetASyntheticLayout) {
  FixtureOptions o;
  o.addresses = false;
  o.page_data = false;
  const Profile p = make_training_profile(o);
  const auto m = model_of(p);
  const auto snap = build_snapshot(m);
  const auto j = json::parse(snapshot_json(m, snap));
  const auto problems = check_snapshot(j);
  EXPECT_TRUE(problems.empty()) << problems.front();
  EXPECT_EQ(j["tierpack"]["devices"][0]["addresses"], "synthetic");
  // The layout reuses freed space: its segment is smaller than the sum of all tensors.
  std::uint64_t all = 0, seg = 0;
  for (const auto& t : p.tensors) all += t.device == 0 ? t.bytes : 0;
  for (const auto& s : j["segments"])
    if (s["device"] == 0) seg += s["total_size"].get<std::uint64_t>();
  EXPECT_LT(seg, all);
  EXPECT_GE(seg, p.peak_bytes(0));
}

TEST(MemorySnapshot, OverlappingProfiledAddressesFallBackToALayout) {
  Profile p = make_training_profile();
  // Two parameters (alive together) at the same address: not showable as profiled.
  p.tensors[1].address = p.tensors[0].address;
  const auto m = model_of(p);
  const auto j = json::parse(snapshot_json(m, build_snapshot(m)));
  EXPECT_EQ(j["tierpack"]["devices"][0]["addresses"], "synthetic");
  const auto problems = check_snapshot(j);
  EXPECT_TRUE(problems.empty()) << problems.front();
}

TEST(MemorySnapshot, CheckerCatchesAFreeWithoutAlloc) {
  json s = json::parse(R"({"segments":[{"device":0,"address":4096,"total_size":4096,"allocated_size":0,"active_size":0,
    "requested_size":0,"stream":0,"segment_type":"large","blocks":[{"address":4096,"size":4096,"requested_size":0,"state":"inactive"}]}],
    "device_traces":[[{"action":"free_requested","addr":4096,"size":512,"stream":0,"time_us":1},
                      {"action":"free_completed","addr":4096,"size":512,"stream":0,"time_us":1}]]})");
  EXPECT_FALSE(check_snapshot(s).empty());
}

TEST(MemorySnapshot, PickleHoldsTheSameDictionary) {
  const char* python = std::getenv("TIERPACK_PYTHON");
  const std::string py = python ? python : "python3";
  if (std::system((py + " -c 'import pickle' >/dev/null 2>&1").c_str()) != 0) GTEST_SKIP() << "no python3 to read the pickle";
  // Enough layers that lists exceed one APPENDS batch (1000 items).
  FixtureOptions o;
  o.layers = 80;
  const Profile p = make_training_profile(o);
  const auto m = model_of(p);
  const auto snap = build_snapshot(m);
  ASSERT_GT(snap.devices[0].trace.size(), 1000u);
  const auto dir = scratch_dir("pickle");
  write_file_atomic(dir + "/s.json", snapshot_json(m, snap));
  write_file_atomic(dir + "/s.pickle", snapshot_pickle(m, snap));
  const std::string cmd = py + " -c \"import json,pickle,sys; a=pickle.load(open(sys.argv[1],'rb')); b=json.load(open(sys.argv[2]));"
                               " sys.exit(0 if a==b else 3)\" " + dir + "/s.pickle " + dir + "/s.json";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::filesystem::remove_all(dir);
}


// Note [Memory snapshot from a profile]: a tensor whose source the profile knows gets a second frame
// (file, line, function) after the allocating op's; one without keeps the op's frame alone. The module
// it was allocated in follows the function's name (Note [Module paths]).
TEST(MemorySnapshot, SourceLinesAreFramesAfterTheAllocatingOp) {
  for (const auto& [module, name] : {std::pair<std::string, std::string>{"", "forward"},
                                     {"transformer.h.3.mlp.c_fc", "forward in transformer.h.3.mlp.c_fc"}}) {
    Profile p = make_training_profile();
    p.sources = {{"/home/me/model.py", 63, "forward", module}};
    TensorId with = 0;  // a GPU tensor born in a forward op (in backward, the module would say so)
    for (const auto& t : p.tensors)
      if (t.device == 0 && t.seq >= 0 && p.ops[static_cast<std::size_t>(t.birth_op)].phase == Phase::forward) with = t.id;
    p.tensors[with].source = 0;
    p.validate();
    const auto m = model_of(p);
    const auto j = json::parse(snapshot_json(m, build_snapshot(m)));
    EXPECT_TRUE(check_snapshot(j).empty());
    std::size_t framed = 0;
    for (const auto& e : j["device_traces"][0]) {
      if (e["action"] != "alloc") continue;
      const bool has = e["tierpack_tensor"].get<TensorId>() == with;
      ASSERT_EQ(e["frames"].size(), has ? 2u : 1u);
      if (!has) continue;
      ++framed;
      EXPECT_EQ(e["frames"][0]["filename"].get<std::string>().rfind("tierpack: op ", 0), 0u);
      EXPECT_EQ(e["frames"][1], json({{"filename", "/home/me/model.py"}, {"line", 63}, {"name", name}}));
    }
    EXPECT_EQ(framed, 1u);
  }
}

}  // namespace
