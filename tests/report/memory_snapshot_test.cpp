// memory_snapshot.json: the PyTorch snapshot schema, self-consistent (every free has an alloc, no
// address allocated twice at once, blocks tile their segments, the trace ends in the segments'
// state), with tier and class under extra keys; memory_snapshot.pickle holds the same dictionary.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/file_envelope.hpp"
#include "report/memory_snapshot.hpp"
#include "report/summary.hpp"
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

/// Problems with a snapshot; empty when it is self-consistent.
std::vector<std::string> check_snapshot(const json& s) {
  std::vector<std::string> bad;
  for (const char* key : {"segments", "device_traces"})
    if (!s.contains(key) || !s[key].is_array()) return {std::string("missing ") + key};
  // Segments: blocks tile them; sizes add up.
  std::map<int, std::vector<std::pair<std::uint64_t, std::uint64_t>>> seg_ranges;
  std::map<int, std::set<std::pair<std::uint64_t, std::uint64_t>>> active_blocks;
  for (const auto& seg : s["segments"]) {
    for (const char* key : {"device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
                            "segment_type", "blocks"})
      if (!seg.contains(key)) bad.push_back(std::string("segment without ") + key);
    const int dev = seg["device"];
    std::uint64_t at = seg["address"], allocated = 0;
    const std::uint64_t end = at + seg["total_size"].get<std::uint64_t>();
    seg_ranges[dev].push_back({at, end});
    for (const auto& b : seg["blocks"]) {
      if (b.contains("address") && b["address"].get<std::uint64_t>() != at) bad.push_back("blocks do not tile their segment");
      const std::string state = b["state"];
      if (state != "active_allocated" && state != "inactive") bad.push_back("unknown block state " + state);
      if (state == "active_allocated") {
        allocated += b["size"].get<std::uint64_t>();
        active_blocks[dev].insert({at, b["size"].get<std::uint64_t>()});
      }
      if (b["requested_size"].get<std::uint64_t>() > b["size"].get<std::uint64_t>()) bad.push_back("requested > size");
      at += b["size"].get<std::uint64_t>();
    }
    if (at != end) bad.push_back("block sizes do not add up to total_size");
    if (allocated != seg["allocated_size"].get<std::uint64_t>()) bad.push_back("allocated_size is not the active blocks' sum");
  }
  // Traces: replay them.
  const auto& traces = s["device_traces"];
  for (std::size_t dev = 0; dev < traces.size(); ++dev) {
    std::map<std::uint64_t, std::uint64_t> live;  // addr -> size
    std::set<std::uint64_t> requested;
    std::int64_t last_time = 0;
    auto in_segment = [&](std::uint64_t a, std::uint64_t n) {
      for (const auto& [b, e] : seg_ranges[static_cast<int>(dev)])
        if (a >= b && a + n <= e) return true;
      return false;
    };
    for (const auto& e : traces[dev]) {
      for (const char* key : {"action", "addr", "size", "stream", "time_us"})
        if (!e.contains(key)) bad.push_back(std::string("trace entry without ") + key);
      const std::string a = e["action"];
      const std::uint64_t addr = e["addr"], size = e["size"];
      const std::int64_t t = e["time_us"];
      if (t < last_time) bad.push_back("time_us goes backwards");
      last_time = t;
      if (a == "alloc") {
        if (live.count(addr)) bad.push_back("address allocated twice at once");
        auto next = live.lower_bound(addr);
        if (next != live.end() && next->first < addr + size) bad.push_back("alloc overlaps a live block");
        if (next != live.begin() && std::prev(next)->first + std::prev(next)->second > addr) bad.push_back("alloc overlaps a live block");
        live[addr] = size;
        if (!in_segment(addr, size)) bad.push_back("alloc outside every segment");
      } else if (a == "free_requested") {
        if (!live.count(addr) || live[addr] != size) bad.push_back("free_requested without a matching alloc");
        requested.insert(addr);
      } else if (a == "free_completed") {
        if (!requested.count(addr)) bad.push_back("free_completed without free_requested");
        requested.erase(addr);
        live.erase(addr);
      } else if (a != "snapshot") {
        bad.push_back("unexpected action " + a);
      }
    }
    std::set<std::pair<std::uint64_t, std::uint64_t>> end_state(live.begin(), live.end());
    if (end_state != active_blocks[static_cast<int>(dev)]) bad.push_back("trace end state differs from the segments' active blocks");
  }
  return bad;
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

}  // namespace
