// The summary names what matters: top tensors, false sharing, hidden accesses, divergence.
#include <gtest/gtest.h>

#include <array>

#include <nlohmann/json.hpp>

#include "profiler/event_recorder.hpp"
#include "profiler/profile_summary.hpp"
#include "tests/profiler/fake_page_tracer.hpp"

using namespace tierpack;

namespace {
constexpr std::uintptr_t kBase = 0x7e0000000000;
const void* P(std::uintptr_t a) { return reinterpret_cast<const void*>(a); }

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }
}  // namespace

TEST(ProfileSummary, ReportsFalseSharingHiddenAccessesAndDivergence) {
  auto tracer = std::make_unique<test::FakePageTracer>();
  auto& fake = *tracer;
  RecorderOptions o;
  o.warmup_iterations = 1;
  o.discover_topology = false;
  o.command = "python3 train.py";
  EventRecorder r(o, std::move(tracer));
  r.start();
  r.alloc(P(kBase), 128, -1, 0, true);  // a long-lived tensor
  for (int i = 0; i < 4; ++i) {
    auto op = r.op_begin("aten::add", std::vector<const void*>{P(kBase)});
    const std::size_t tmp_bytes = i == 3 ? 96 : 64;
    r.alloc(P(kBase + 128), tmp_bytes, -1, 0, true);  // a temporary on the same page
    r.op_end(op, std::vector<const void*>{P(kBase + 128)});
    r.free(P(kBase + 128));
    auto op2 = r.op_begin("aten::empty");
    r.alloc(P(kBase + 8 * 4096), 1 << 20, -1, 0, true);
    r.op_end(op2, std::vector<const void*>{P(kBase + 8 * 4096)});
    fake.touch(kBase + 8 * 4096);  // touched between ops: hidden
    auto op3 = r.op_begin("aten::relu");
    r.op_end(op3);
    r.free(P(kBase + 8 * 4096));
    r.mark_iteration(IterationSource::explicit_mark);
  }
  const Profile p = r.finish();
  const std::string s = format_profile_summary(p);
  EXPECT_TRUE(contains(s, "python3 train.py")) << s;
  EXPECT_TRUE(contains(s, "page false sharing: 1 page(s)")) << s;
  EXPECT_TRUE(contains(s, "hidden accesses: 1 page(s)")) << s;
  EXPECT_TRUE(contains(s, "false-shared")) << s;
  EXPECT_TRUE(contains(s, "HIDDEN")) << s;
  EXPECT_TRUE(contains(s, "1 iteration(s) diverged")) << s;
  EXPECT_TRUE(contains(s, "size 96 != 64 at seq 0")) << s;
  EXPECT_TRUE(contains(s, "top tensors by bytes x lifetime")) << s;
  EXPECT_TRUE(contains(s, "identity " + p.meta.id)) << s;
  EXPECT_EQ(p.meta.id.size(), 16u) << "the recorder gives the profile its identity (Note [Profile identity])";

  // `tierpack profile --summary FILE --json` (issue 26): the same facts as one JSON object.
  const nlohmann::json j = profile_summary_json(p);
  EXPECT_EQ(j["id"], p.meta.id);
  EXPECT_EQ(j["command"], "python3 train.py");
  EXPECT_EQ(j["tensors"], p.tensors.size());
  EXPECT_EQ(j["peak_bytes"]["host"], p.peak_bytes(-1));
  EXPECT_EQ(j["pages"]["false_shared"], 1);
  EXPECT_EQ(j["pages"]["hidden_access"], 1);
  ASSERT_EQ(j["divergences"].size(), 1u);
  EXPECT_TRUE(contains(j["divergences"][0]["reason"].get<std::string>(), "size 96 != 64 at seq 0"));
  ASSERT_FALSE(j["top_tensors"].empty());
  EXPECT_EQ(j["top_tensors"][0]["bytes"], 1u << 20) << "the largest bytes x lifetime first, as in the table";
  EXPECT_EQ(j["iterations"].size(), p.iterations.size());
}

TEST(ProfileSummary, EmptyProfileStillPrints) {
  Profile p;
  const std::string s = format_profile_summary(p);
  EXPECT_TRUE(contains(s, "(no tensors)")) << s;
  EXPECT_TRUE(contains(s, "divergence: none")) << s;
  EXPECT_TRUE(contains(s, "identity unknown")) << s;
  EXPECT_TRUE(profile_summary_json(p)["id"].is_null());
}

namespace {

/// Three tensors, the largest first: one born in a forward op, two in a backward op, each with the
/// source given (-1 unknown).
Profile profile_with_sources(std::vector<SourceLocation> sources, std::array<std::int32_t, 3> source_of) {
  Profile p;
  p.ops.push_back({0, "aten::addmm", 0, 10, 0, -1, Phase::forward, {}, {0}});
  p.ops.push_back({1, "AddmmBackward0", 10, 20, 0, -1, Phase::backward, {}, {1, 2}});
  p.iteration_ns = 20;
  for (std::uint32_t i = 0; i < 3; ++i) {
    TensorRecord t;
    t.id = i;
    t.seq = i;
    t.bytes = std::uint64_t{1} << (20 - 5 * i);  // 1 MiB, 32 KiB, 1 KiB
    t.birth_op = i == 0 ? 0 : 1;
    t.source = source_of[i];
    p.tensors.push_back(t);
  }
  p.sources = std::move(sources);
  p.validate();
  return p;
}

}  // namespace

// The top tensors say where the program allocated them ("-" / null when the profile does not know).
TEST(ProfileSummary, TopTensorsNameTheirSourceLine) {
  const Profile p = profile_with_sources({{"/home/me/model.py", 63, "forward"}}, {0, -1, -1});
  const std::string s = format_profile_summary(p);
  EXPECT_TRUE(contains(s, "source")) << s;
  EXPECT_TRUE(contains(s, "model.py:63 forward")) << s;
  const auto j = profile_summary_json(p);
  ASSERT_EQ(j["top_tensors"].size(), 3u);
  EXPECT_EQ(j["top_tensors"][0]["source"],
            nlohmann::json({{"file", "/home/me/model.py"}, {"line", 63}, {"function", "forward"}, {"module", ""},
                            {"text", "model.py:63 forward"}}));
  EXPECT_TRUE(j["top_tensors"][1]["source"].is_null());
}

// Next to the source line, the module it ran in (Note [Module paths]); "(backward)" in a backward op.
TEST(ProfileSummary, TopTensorsNameTheirModule) {
  const Profile p = profile_with_sources(
      {{"/home/me/model.py", 63, "forward", "transformer.h.3.mlp.c_fc"}, {"/home/me/train.py", 40, "<module>"}},
      {0, 1, -1});
  const std::string s = format_profile_summary(p);
  EXPECT_TRUE(contains(s, " module ")) << s;
  auto line_with = [&](const std::string& text) {
    const auto at = s.find(text);
    return at == std::string::npos ? std::string() : s.substr(s.rfind('\n', at) + 1, s.find('\n', at) - s.rfind('\n', at));
  };
  EXPECT_TRUE(contains(line_with("model.py:63 forward"), " transformer.h.3.mlp.c_fc ")) << s;
  EXPECT_TRUE(contains(line_with("train.py:40 <module>"), " (backward) ")) << s;
  const auto j = profile_summary_json(p);
  ASSERT_EQ(j["top_tensors"].size(), 3u);
  EXPECT_EQ(j["top_tensors"][0]["source"]["module"], "transformer.h.3.mlp.c_fc");
  EXPECT_EQ(j["top_tensors"][1]["source"]["module"], "(backward)");
  EXPECT_TRUE(j["top_tensors"][2]["source"].is_null());
}
