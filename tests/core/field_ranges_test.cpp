// Field ranges in the file readers (core/detail/json_util.hpp, Note [Field ranges]): every field is
// checked once, where it is read, with a message that names the record and the field; values that
// overflowed the planner and the report (a 2^63-1-byte tensor), wrapped (a negative step time) or fell
// back to a default (a misspelt page_size) are refused, and nlohmann's own messages do not reach users.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <functional>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/file_envelope.hpp"
#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/run_stats.hpp"
#include "core/tier_spec.hpp"

using namespace tierpack;

namespace {

Profile small_profile() {
  Profile p;
  p.meta.command = "python train.py";
  Tier dram;
  dram.kind = TierKind::host_dram;
  dram.name = "dram0";
  dram.capacity_bytes = 1ull << 34;
  p.topology.add(dram);
  for (int i = 0; i < 3; ++i) {
    OpRecord op;
    op.index = i;
    op.name = "aten::op" + std::to_string(i);
    op.begin_ns = 100u * i;
    op.end_ns = 100u * i + 50;
    p.ops.push_back(op);
  }
  TensorRecord a;
  a.id = 0;
  a.seq = 0;
  a.bytes = 4096;
  a.birth_op = 0;
  a.death_op = 2;
  a.uses = {0, 2};
  TensorRecord b = a;
  b.id = 1;
  b.seq = 1;
  p.tensors = {a, b};
  p.iteration_ns = 300;
  return p;
}

Plan small_plan() {
  Plan p;
  p.fast_tier = 0;
  p.slow_tier = 1;
  Tier gpu;
  gpu.kind = TierKind::gpu;
  gpu.name = "gpu0";
  gpu.capacity_bytes = 24ull << 30;
  gpu.page_size = 2 << 20;
  p.topology.add(gpu);
  Tier dram;
  dram.kind = TierKind::host_dram;
  dram.name = "dram0";
  dram.capacity_bytes = 64ull << 30;
  p.topology.add(dram);
  PageGroup g;
  g.id = 0;
  g.home = 0;
  g.bytes = 4 << 20;
  g.page_size = 2 << 20;
  p.groups = {g};
  return p;
}

/// The error parse_profile gives for small_profile() with `edit` applied to its JSON, "" if none.
template <class Edit>
std::string profile_error(Edit edit) {
  nlohmann::json j = small_profile();
  edit(j);
  const std::string payload = j.dump();
  char header[128];
  std::snprintf(header, sizeof header, "tierpack-profile 1 %zu %08x\n", payload.size(), crc32(payload));
  try {
    parse_profile(header + payload, "run.tpk");
  } catch (const format_error& e) {
    return e.what();
  }
  return "";
}

template <class Edit>
std::string plan_error(Edit edit) {
  nlohmann::json j = small_plan();
  edit(j);
  try {
    parse_plan(j.dump(), "plan.json");
  } catch (const format_error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_HAS(text, fragment) EXPECT_NE((text).find(fragment), std::string::npos) << (text)

TEST(FieldRanges, GoodFilesStillRead) {
  EXPECT_EQ(profile_error([](nlohmann::json&) {}), "");
  EXPECT_EQ(plan_error([](nlohmann::json&) {}), "");
  // A page's node is move_pages(2)'s status: a negative errno (-EFAULT) for a page it could not place.
  EXPECT_EQ(profile_error([](nlohmann::json& j) {
              j["pages"] = {{{"address", 4096}, {"tensors", {0}}, {"numa_node", -14}}};
            }),
            "");
}

TEST(FieldRanges, HugeTensorIsRefusedNamingTensorAndField) {
  // 2^63-1 bytes with a valid checksum overflowed Profile::peak_bytes, the report and the planner.
  const std::string msg = profile_error([](nlohmann::json& j) { j["tensors"][1]["bytes"] = INT64_MAX; });
  EXPECT_HAS(msg,
             "run.tpk: invalid profile: tensor 1: field 'bytes' = 9223372036854775807 is out of range (at most 2^48)");
  // Many tensors each in range must not add up past what sums can hold.
  EXPECT_HAS(profile_error([](nlohmann::json& j) {
               const nlohmann::json t = j["tensors"][0];
               j["tensors"] = nlohmann::json::array();
               for (int i = 0; i < 5000; ++i) {
                 auto ti = t;
                 ti["id"] = i;
                 ti["seq"] = i;
                 ti["bytes"] = 1ull << 48;
                 j["tensors"].push_back(ti);
               }
             }),
             "add up to more than 2^60 bytes");
}

TEST(FieldRanges, ImpossibleValuesAreNamed) {
  EXPECT_HAS(profile_error([](nlohmann::json& j) { j["tensors"][1]["birth_op"] = 2, j["tensors"][1]["death_op"] = 1; }),
             "tensor 1: dies at op 1 (death_op), before it is born at op 2 (birth_op)");
  EXPECT_HAS(profile_error([](nlohmann::json& j) { j["ops"][2]["end_ns"] = -5; }),
             "op 2: field 'end_ns' = -5 is out of range");
  EXPECT_HAS(profile_error([](nlohmann::json& j) { j["iteration_ns"] = 1e300; }),
             "field 'iteration_ns' = 1e+300 is out of range");
  EXPECT_HAS(profile_error([](nlohmann::json& j) { j["meta"]["host_page_size"] = 4095; }),
             "field 'meta.host_page_size' = 4095 is not a power of two");
  EXPECT_HAS(profile_error([](nlohmann::json& j) { j["tensors"][0]["device"] = -7; }),
             "tensor 0: field 'device' = -7 is out of range (at least -1)");
  EXPECT_HAS(profile_error([](nlohmann::json& j) { j["topology"]["tiers"][0]["page_size"] = 3; }),
             "field 'topology': tier 0: field 'page_size' = 3 is not a power of two");
}

TEST(FieldRanges, TypeErrorsNameTheFieldNotNlohmann) {
  const std::string msg = profile_error([](nlohmann::json& j) { j["tensors"][1]["bytes"] = "lots"; });
  EXPECT_HAS(msg, "tensor 1: field 'bytes' = \"lots\" must be a whole number, not string");
  EXPECT_EQ(msg.find("json.exception"), std::string::npos) << msg;
  EXPECT_HAS(profile_error([](nlohmann::json& j) { j["tensors"][1].erase("bytes"); }),
             "tensor 1: missing field 'bytes'");
  EXPECT_HAS(profile_error([](nlohmann::json& j) { j["tensors"][1] = 5; }),
             "tensor 1: = 5 must be an object, not number");
  EXPECT_HAS(profile_error([](nlohmann::json& j) { j["ops"][0]["phase"] = "sideways"; }),
             "op 0: field 'phase': unknown phase 'sideways'");
  EXPECT_HAS(profile_error([](nlohmann::json& j) {
               j["tensors"][0]["uses"] = {0, "x"};
             }),
             "tensor 0: field 'uses' element 1 = \"x\" must be a whole number, not string");
  for (const auto& edit : {+[](nlohmann::json& j) { j["topology"] = 3; }, +[](nlohmann::json& j) { j["meta"] = "m"; },
                           +[](nlohmann::json& j) {
                             j["pages"] = {{{"address", "0x10"}, {"tensors", {0}}}};
                           }}) {
    const std::string m = profile_error(edit);
    EXPECT_NE(m, "");
    EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
  }
}

TEST(FieldRanges, CorruptedPlanPageSizeIsAnErrorNotADefault) {
  // A misspelt key left page_size at its 4096 default; a page size of 1 divided every group.
  EXPECT_HAS(plan_error([](nlohmann::json& j) {
               j["groups"][0]["page_sise"] = j["groups"][0]["page_size"];
               j["groups"][0].erase("page_size");
             }),
             "group 0: unknown field 'page_sise'");
  EXPECT_HAS(plan_error([](nlohmann::json& j) { j["groups"][0].erase("page_size"); }),
             "group 0: missing field 'page_size'");
  EXPECT_HAS(plan_error([](nlohmann::json& j) { j["groups"][0]["page_size"] = 1 << 20 | 1; }),
             "group 0: field 'page_size' = 1048577 is not a power of two");
  EXPECT_HAS(plan_error([](nlohmann::json& j) { j["groups"][0]["page_size"] = "2M"; }),
             "group 0: field 'page_size' = \"2M\" must be a whole number, not string");
  EXPECT_HAS(plan_error([](nlohmann::json& j) { j["groups"][0]["class"] = "weights"; }),
             "group 0: field 'class': unknown tensor class 'weights'");
  EXPECT_HAS(plan_error([](nlohmann::json& j) {
               const nlohmann::json g = j["groups"][0];
               for (int i = 1; i < 5000; ++i) {
                 auto gi = g;
                 gi["id"] = i;
                 gi["bytes"] = 1ull << 48;
                 j["groups"].push_back(gi);
               }
             }),
             "the groups add up to more than 2^60 bytes");
  EXPECT_HAS(plan_error([](nlohmann::json& j) { j["prediction"]["step_ns"] = -1.0; }),
             "field 'prediction.step_ns' = -1.0 is out of range (at least 0.0)");
}

TEST(FieldRanges, NegativeOrHugeRunStatTimesAreRefused) {
  auto run_error = [](const std::function<void(nlohmann::json&)>& edit) {
    RunStats s;
    s.iterations.push_back({0, 1000, 0, 0, 0, 0, 0, 0});
    s.moves.push_back({0, MoveKind::evict, 0, 1, 4096, 10, 20});
    nlohmann::json j = s;
    edit(j);
    const std::string path = ::testing::TempDir() + "/tierpack_run_stats_" + std::to_string(::getpid()) + ".json";
    write_file_atomic(path, j.dump());
    try {
      read_run_stats(path);
    } catch (const format_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(run_error([](nlohmann::json&) {}), "");
  // A negative step time wrapped to ~2^64 ns and was reported as years.
  EXPECT_HAS(run_error([](nlohmann::json& j) { j["iterations"][0]["step_ns"] = -3; }),
             "iteration 0: field 'step_ns' = -3 is out of range");
  EXPECT_HAS(run_error([](nlohmann::json& j) { j["iterations"][0]["step_ns"] = 1ull << 62; }),
             "iteration 0: field 'step_ns' = 4611686018427387904 is out of range (at most 2^53 ns)");
  EXPECT_HAS(run_error([](nlohmann::json& j) { j["moves"][0]["kind"] = 7; }),
             "move 0: field 'kind' = 7 must be a string, not number");
  EXPECT_HAS(run_error([](nlohmann::json& j) { j["moves"][0]["byte"] = 7; }), "move 0: unknown field 'byte'");
}


// Version 2: the sources table and each tensor's index into it (a bad index names the field).
TEST(FieldRanges, AllocationSourcesAreCheckedNamingTheField) {
  auto with_sources = [](nlohmann::json& j) {
    j["sources"] = {{{"file", "/home/me/model.py"}, {"line", 63}, {"function", "forward"}}};
    j["tensors"][0]["source"] = 0;
  };
  // The error of a profile with one source and `edit` applied on top.
  auto source_error = [&](const std::function<void(nlohmann::json&)>& edit) {
    return profile_error([&](nlohmann::json& j) {
      with_sources(j);
      edit(j);
    });
  };
  EXPECT_EQ(profile_error(with_sources), "");
  EXPECT_HAS(source_error([](nlohmann::json& j) { j["tensors"][1]["source"] = 1; }),
             "run.tpk: invalid profile: tensor 1: field 'source' = 1 is out of range (the profile has 1 source(s))");
  EXPECT_HAS(profile_error([](nlohmann::json& j) { j["tensors"][1]["source"] = 0; }),
             "tensor 1: field 'source' = 0 is out of range (the profile has 0 source(s))");
  EXPECT_HAS(source_error([](nlohmann::json& j) { j["tensors"][1]["source"] = -2; }),
             "tensor 1: field 'source' = -2 is out of range (at least -1)");
  EXPECT_HAS(source_error([](nlohmann::json& j) { j["tensors"][1]["source"] = "model.py:63"; }),
             "tensor 1: field 'source' = \"model.py:63\" must be a whole number, not string");
  EXPECT_HAS(source_error([](nlohmann::json& j) { j["sources"][0]["line"] = -1; }),
             "source 0: field 'line' = -1 is out of range (at least 0)");
  EXPECT_HAS(source_error([](nlohmann::json& j) { j["sources"][0].erase("file"); }), "source 0: missing field 'file'");
  EXPECT_HAS(source_error([](nlohmann::json& j) { j["sources"][0]["file"] = ""; }), "source 0: field 'file' is empty");
  EXPECT_HAS(source_error([](nlohmann::json& j) { j["sources"][0]["lineno"] = 3; }), "source 0: unknown field 'lineno'");
  EXPECT_HAS(profile_error([](nlohmann::json& j) { j["sources"] = "model.py"; }),
             "field 'sources' = \"model.py\" must be a list, not string");
}

// Version 3: a source's module path (a string of dotted names, none empty).
TEST(FieldRanges, ModulePathsAreCheckedNamingTheField) {
  auto with_module = [](const nlohmann::json& module) {
    return [module](nlohmann::json& j) {
      j["sources"] = {{{"file", "/home/me/model.py"}, {"line", 63}, {"function", "forward"}, {"module", module}}};
      j["tensors"][0]["source"] = 0;
    };
  };
  EXPECT_EQ(profile_error(with_module("transformer.h.3.mlp.c_fc")), "");
  EXPECT_EQ(profile_error(with_module("")), "") << "no module running";
  EXPECT_EQ(profile_error(with_module("GPT2")), "");
  EXPECT_HAS(profile_error(with_module(3)), "source 0: field 'module' = 3 must be a string, not number");
  EXPECT_HAS(profile_error(with_module(nullptr)), "source 0: field 'module'");
  EXPECT_HAS(profile_error(with_module("h..mlp")),
             "run.tpk: invalid profile: source 0: field 'module' = \"h..mlp\" is not a module path (an empty name "
             "between dots)");
  EXPECT_HAS(profile_error(with_module(".h")), "source 0: field 'module' = \".h\" is not a module path");
  EXPECT_HAS(profile_error(with_module("h.")), "source 0: field 'module' = \"h.\" is not a module path");
}

}  // namespace
