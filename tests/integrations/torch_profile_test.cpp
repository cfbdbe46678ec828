// Whole profiled runs: `tierpack profile` on Python scripts and LibTorch programs whose tensors, ops
// and lifetimes are known (tests/integrations/scripts/, explicit_steps.cpp, examples/), checked
// against that ground truth. Needs a Python with torch ($TIERPACK_TEST_PYTHON, default /usr/bin/python3).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.hpp"
#include "core/file_envelope.hpp"
#include "core/profile.hpp"
#include "tests/support/run_command.hpp"
#include "profiler/tensor_lifetime.hpp"

using namespace tierpack;
namespace fs = std::filesystem;

namespace {

using tierpack::testing::Proc;
using tierpack::testing::run;

std::string python() {
  const char* p = std::getenv("TIERPACK_TEST_PYTHON");
  return p && *p ? p : "/usr/bin/python3";
}
std::string tierpack_bin() { return std::string(TIERPACK_BINARY_DIR) + "/bin/tierpack"; }
std::string script(const std::string& name) { return std::string(TIERPACK_SOURCE_DIR) + "/tests/integrations/scripts/" + name; }
std::string temp(const std::string& name) {
  return (fs::temp_directory_path() / ("tierpack_torch_" + std::to_string(::getpid()) + "_" + name)).string();
}

/// Profiles `command` with the given extra flags; asserts success; returns the profile.
Profile profile(const std::string& name, const std::string& flags, const std::string& command, Proc* out = nullptr) {
  const std::string path = temp(name + ".tpk");
  Proc r = run(tierpack_bin() + " profile -o " + path + " " + flags + " -- " + command);
  EXPECT_EQ(r.status, 0) << r.output;
  Profile p;
  try {
    p = read_profile(path);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what() << "\n" << r.output;
  }
  fs::remove(path);
  if (out) *out = r;
  return p;
}

/// The user scope ("tp.*") an op runs in, or "" outside any.
std::string scope_of(const Profile& p, OpIndex op) {
  while (op >= 0 && op < static_cast<OpIndex>(p.ops.size())) {
    const auto& o = p.ops[static_cast<std::size_t>(op)];
    if (o.name.rfind("tp.", 0) == 0) return o.name;
    op = o.parent;
  }
  return "";
}

std::vector<const TensorRecord*> born_in(const Profile& p, std::uint64_t bytes, const std::string& scope) {
  std::vector<const TensorRecord*> out;
  for (const auto& t : p.tensors)
    if (t.bytes == bytes && t.seq >= 0 && scope_of(p, t.birth_op) == scope) out.push_back(&t);
  return out;
}

bool used_in(const Profile& p, const TensorRecord& t, const std::string& scope, const std::string& op_name = "") {
  for (auto u : t.uses)
    if (scope_of(p, u) == scope && (op_name.empty() || p.ops[static_cast<std::size_t>(u)].name == op_name)) return true;
  return false;
}

/// The known iteration of scripts/known_tensors.py and explicit_steps.cpp.
void check_known_iteration(const Profile& p, bool page_data) {
  EXPECT_EQ(p.meta.iteration_source, "explicit");
  EXPECT_EQ(p.meta.profiled_iteration, 1);
  EXPECT_EQ(p.meta.iterations_observed, 3);
  EXPECT_TRUE(p.divergences.empty());
  ASSERT_EQ(p.iterations.size(), 3u);
  EXPECT_EQ(p.iterations[1].signature, p.iterations[2].signature);

  // w: before the loop, alive throughout, read in tp.add.
  const TensorRecord* w = nullptr;
  for (const auto& t : p.tensors)
    if (t.bytes == 8000 && t.seq == -1) w = &t;
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->birth_op, kBeforeIteration);
  EXPECT_EQ(w->death_op, kAfterIteration);
  EXPECT_TRUE(used_in(p, *w, "tp.add"));

  auto a = born_in(p, 24000, "tp.make_a");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(scope_of(p, a[0]->death_op), "tp.free_a");
  EXPECT_TRUE(used_in(p, *a[0], "tp.add"));  // through the view a[:1000]

  auto b = born_in(p, 40000, "tp.make_b");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(scope_of(p, b[0]->death_op), "tp.free_bc");
  EXPECT_TRUE(used_in(p, *b[0], "tp.make_b", "aten::fill_"));
  EXPECT_TRUE(used_in(p, *b[0], "tp.add"));
  EXPECT_LT(a[0]->seq, b[0]->seq);

  // Two 8000-B tensors from tp.add: the first sum dies there, c lives until tp.free_bc.
  auto sums = born_in(p, 8000, "tp.add");
  ASSERT_EQ(sums.size(), 2u);
  std::sort(sums.begin(), sums.end(), [](auto x, auto y) { return x->seq < y->seq; });
  EXPECT_EQ(scope_of(p, sums[0]->death_op), "tp.add");
  EXPECT_EQ(scope_of(p, sums[1]->death_op), "tp.free_bc");
  EXPECT_TRUE(used_in(p, *sums[1], "tp.mul"));
  EXPECT_EQ(estimate_class(*sums[0], p.ops), TensorClass::temporary);

  auto d = born_in(p, 8000, "tp.mul");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(scope_of(p, d[0]->death_op), "tp.keep");

  auto keep = born_in(p, 128, "tp.keep");
  ASSERT_EQ(keep.size(), 1u);
  EXPECT_EQ(keep[0]->death_op, kAfterIteration);
  int old_keep = 0;
  for (const auto& t : p.tensors)
    if (t.bytes == 128 && t.seq == -1) {
      ++old_keep;
      EXPECT_EQ(scope_of(p, t.death_op), "tp.keep");
    }
  EXPECT_EQ(old_keep, 1);

  for (const auto& op : p.ops) EXPECT_EQ(op.phase, Phase::forward) << op.name;
  for (const auto& t : p.tensors) EXPECT_FALSE(t.has(kTensorHiddenAccess)) << "tensor " << t.id;
  if (page_data) {
    EXPECT_EQ(a[0]->pages, 6u);  // 24000 B, page-aligned
    EXPECT_EQ(a[0]->pages_touched, 6u);
    EXPECT_EQ(b[0]->pages, 10u);
    EXPECT_EQ(b[0]->pages_touched, 10u);
    EXPECT_GE(a[0]->page_touches, 6u);
  }
}

std::vector<std::uint64_t> parameter_bytes(const std::string& truth_file) {
  std::ifstream in(truth_file);
  const auto j = nlohmann::json::parse(in);
  return j.at("parameter_bytes").get<std::vector<std::uint64_t>>();
}

std::string loss_lines(const std::string& output) {
  std::istringstream in(output);
  std::string line, out;
  while (std::getline(in, line))
    if (line.rfind("iter ", 0) == 0) out += line + "\n";
  return out;
}

/// The line of `script` tagged `# SOURCE: <tag>` (1-based), 0 if none.
int tagged_line(const std::string& path, const std::string& tag) {
  std::ifstream in(path);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (line.find("# SOURCE: " + tag) != std::string::npos) return n;
  return 0;
}

}  // namespace

TEST(TorchProfile, PythonKnownTensorsMatchGroundTruth) {
  const Profile p = profile("known_py", "--page-tracer mprotect", python() + " " + script("known_tensors.py"));
  EXPECT_EQ(p.meta.page_tracer, "mprotect");
  check_known_iteration(p, /*page_data=*/true);
}

TEST(TorchProfile, LibTorchProgramWithExplicitStepsMatchesGroundTruth) {
  const std::string path = temp("known_cpp.tpk");
  const Proc r = run(std::string(TIERPACK_BINARY_DIR) + "/bin/explicit_steps " + path + " mprotect");
  ASSERT_EQ(r.status, 0) << r.output;
  const Profile p = read_profile(path);
  fs::remove(path);
  EXPECT_NE(p.meta.framework.find("torch"), std::string::npos);
  check_known_iteration(p, /*page_data=*/true);
}

TEST(TorchProfile, PythonExampleParametersGradientsAndOptimizerState) {
  const std::string truth = temp("truth_py.json");
  Proc traced;
  const Profile p = profile("train_py", "", python() + " " + TIERPACK_SOURCE_DIR "/examples/train_cpu.py --truth " + truth,
                            &traced);
  const auto params = parameter_bytes(truth);
  const auto j = nlohmann::json::parse(std::ifstream(truth));
  fs::remove(truth);
  EXPECT_EQ(p.meta.iteration_source, "optimizer-step");
  EXPECT_EQ(p.meta.profiled_iteration, 1);
  EXPECT_EQ(p.meta.iterations_observed, 6);
  EXPECT_TRUE(p.divergences.empty());
  std::multiset<std::uint64_t> want(params.begin(), params.end()), got_params, got_grads;
  int optim = 0;
  bool forward = false, backward = false, optimizer = false;
  for (const auto& op : p.ops) {
    forward |= op.phase == Phase::forward;
    backward |= op.phase == Phase::backward;
    optimizer |= op.phase == Phase::optimizer;
  }
  EXPECT_TRUE(forward && backward && optimizer);
  for (const auto& t : p.tensors) {
    if (t.has(kTensorParameter)) {
      got_params.insert(t.bytes);
      EXPECT_EQ(t.birth_op, kBeforeIteration);
      EXPECT_EQ(t.death_op, kAfterIteration);
      bool fwd = false, opt = false;
      for (auto u : t.uses) {
        fwd |= p.ops[static_cast<std::size_t>(u)].phase == Phase::forward;
        opt |= p.ops[static_cast<std::size_t>(u)].phase == Phase::optimizer;
      }
      EXPECT_TRUE(fwd && opt) << "parameter " << t.id << " is read in forward and updated by the optimizer";
    }
    if (t.has(kTensorGradient)) got_grads.insert(t.bytes);
    if (t.has(kTensorOptimizerState)) ++optim;
    EXPECT_FALSE(t.has(kTensorHiddenAccess)) << "tensor " << t.id;
  }
  EXPECT_EQ(got_params, want);
  EXPECT_EQ(got_grads, want);
  // Activations autograd saved (saved-tensor hooks during the recording): born in forward, dead in backward.
  int saved_activations = 0;
  for (const auto& t : p.tensors)
    if (t.has(kTensorSavedForBackward) && t.birth_op >= 0 && t.death_op != kAfterIteration &&
        p.ops[static_cast<std::size_t>(t.birth_op)].phase == Phase::forward &&
        p.ops[static_cast<std::size_t>(t.death_op)].phase == Phase::backward)
      ++saved_activations;
  EXPECT_GE(saved_activations, 5);
  EXPECT_EQ(optim, j.at("optimizer_state_tensors").get<int>());
  // Profiling changes nothing the program computes.
  const Proc plain = run(python() + " " + TIERPACK_SOURCE_DIR "/examples/train_cpu.py");
  ASSERT_EQ(plain.status, 0) << plain.output;
  EXPECT_EQ(loss_lines(traced.output), loss_lines(plain.output));
  EXPECT_FALSE(loss_lines(plain.output).empty());
}

TEST(TorchProfile, UnmodifiedLibTorchProgramThroughPreloadAndPeriodicity) {
  const std::string truth = temp("truth_cpp.json");
  Proc traced;
  const Profile p = profile("train_cpp", "", std::string(TIERPACK_BINARY_DIR) + "/bin/train_cpu 10 " + truth, &traced);
  const auto params = parameter_bytes(truth);
  fs::remove(truth);
  EXPECT_EQ(p.meta.iteration_source, "periodicity");
  EXPECT_GE(p.meta.profiled_iteration, 1);
  EXPECT_TRUE(p.divergences.empty());
  // Every parameter is a tensor alive across the whole profiled iteration.
  std::multiset<std::uint64_t> persistent;
  for (const auto& t : p.tensors)
    if (t.seq == -1 && t.birth_op == kBeforeIteration && t.death_op == kAfterIteration) persistent.insert(t.bytes);
  for (auto b : params) {
    auto it = persistent.find(b);
    ASSERT_NE(it, persistent.end()) << "parameter of " << b << " bytes";
    persistent.erase(it);
  }
  // Later iterations allocate exactly like the profiled one.
  for (const auto& it : p.iterations)
    if (it.index > p.meta.profiled_iteration) {
      EXPECT_TRUE(it.matches_profiled) << "iteration " << it.index;
    }
  const Proc plain = run(std::string(TIERPACK_BINARY_DIR) + "/bin/train_cpu 10");
  EXPECT_EQ(loss_lines(traced.output), loss_lines(plain.output));
}

TEST(TorchProfile, AShellWrapperIsLeftAloneAndTheLibTorchProgramUnderItIsProfiled) {
  Proc traced;
  const Profile p = profile("wrapped", "", "sh -c 'exec " + std::string(TIERPACK_BINARY_DIR) + "/bin/train_cpu 8'", &traced);
  EXPECT_EQ(p.meta.iteration_source, "periodicity");
  EXPECT_GT(p.ops.size(), 100u);
  EXPECT_NE(p.meta.command.find("train_cpu"), std::string::npos) << p.meta.command;
}

TEST(TorchProfile, SummaryReportsFalseSharingOfTwoLifetimesOnOnePage) {
  const std::string path = temp("fs.tpk");
  const Proc r = run(tierpack_bin() + " profile -o " + path + " -- " + python() + " " + script("false_sharing.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  const Profile p = read_profile(path);
  bool found = false;
  for (const auto& pg : p.pages) {
    if (!pg.false_shared) continue;
    bool persistent = false, temporary = false;
    for (auto id : pg.tensors) {
      const auto& t = p.tensors[id];
      persistent |= t.bytes == 32 && t.seq == -1;
      temporary |= t.bytes == 32 && t.seq >= 0 && estimate_class(t, p.ops) == TensorClass::temporary;
    }
    found |= persistent && temporary;
  }
  EXPECT_TRUE(found) << "a page holding the persistent 32-B tensor and a temporary";
  const Proc s = run(tierpack_bin() + " profile --summary " + path);
  fs::remove(path);
  ASSERT_EQ(s.status, 0) << s.output;
  EXPECT_NE(s.output.find("page false sharing: "), std::string::npos) << s.output;
  EXPECT_EQ(s.output.find("page false sharing: 0 page(s)"), std::string::npos) << s.output;
  EXPECT_NE(s.output.find("persistent,32 B"), std::string::npos) << s.output;
}

class HiddenAccess : public ::testing::TestWithParam<const char*> {};

TEST_P(HiddenAccess, APageWrittenBehindTheFrameworksBackIsReported) {
  Proc r;
  const Profile p = profile(std::string("hidden_") + GetParam(), std::string("--page-tracer ") + GetParam(),
                            python() + " " + script("hidden_access.py"), &r);
  if (p.meta.page_tracer == "none") GTEST_SKIP() << "no page tracer here: " << r.output;
  int hidden = 0;
  for (const auto& t : p.tensors) {
    if (!t.has(kTensorHiddenAccess)) continue;
    ++hidden;
    EXPECT_EQ(t.bytes, 4u * 4096) << "only the tensor ctypes wrote into";
    EXPECT_EQ(t.seq, -1);
  }
  EXPECT_EQ(hidden, 1);
  std::size_t hidden_pages = 0;
  for (const auto& pg : p.pages) hidden_pages += pg.hidden_windows > 0 ? 1 : 0;
  EXPECT_EQ(hidden_pages, 4u);
}

INSTANTIATE_TEST_SUITE_P(Tracers, HiddenAccess, ::testing::Values("mprotect", "uffd"));

TEST(TorchProfile, VariableShapeIterationIsADivergence) {
  const Profile p = profile("div", "--warmup 1", python() + " " + script("divergence.py"));
  ASSERT_EQ(p.divergences.size(), 1u);
  EXPECT_EQ(p.divergences[0].iteration, 3);
  EXPECT_NE(p.divergences[0].reason.find("!="), std::string::npos) << p.divergences[0].reason;
  ASSERT_EQ(p.iterations.size(), 5u);
  EXPECT_FALSE(p.iterations[3].matches_profiled);
  EXPECT_TRUE(p.iterations[2].matches_profiled);
  EXPECT_TRUE(p.iterations[4].matches_profiled);
}

TEST(TorchProfile, DataLoaderWorkersDoNotDisturbTheProfile) {
  Proc r;
  const Profile p = profile("workers", "", python() + " " + script("dataloader_workers.py"), &r);
  EXPECT_EQ(p.meta.iteration_source, "optimizer-step");
  EXPECT_EQ(p.meta.iterations_observed, 8);  // 256 samples / 32 per batch
  EXPECT_TRUE(p.divergences.empty());
  EXPECT_GT(p.ops.size(), 10u);
  EXPECT_EQ(r.output.find("Traceback"), std::string::npos) << r.output;
}

TEST(TorchProfile, NoIterationMeansAClearErrorAndNoProfile) {
  const std::string path = temp("none.tpk");
  const Proc r = run(tierpack_bin() + " profile -o " + path + " -- " + python() + " " + script("no_iterations.py"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("no iteration boundary was seen"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no profile was written"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(path));
}

TEST(TorchProfile, APythonWithoutTorchIsNamed) {
  // A Python that cannot import torch: an empty PYTHONPATH cannot hide Debian's torch, so fake one.
  const std::string dir = temp("bin");
  fs::create_directories(dir);
  const std::string fake = dir + "/python3";
  {
    std::ofstream f(fake);
    f << "#!/bin/sh\nexit 3\n";
  }
  fs::permissions(fake, fs::perms::owner_all);
  const Proc r = run(tierpack_bin() + " profile -o " + temp("x.tpk") + " -- " + fake + " train.py");
  fs::remove_all(dir);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("cannot import torch"), std::string::npos) << r.output;
}

TEST(TorchProfile, CorruptOrTruncatedProfilesGiveAClearError) {
  const std::string good = temp("good.tpk");
  const Proc r = run(tierpack_bin() + " profile -o " + good + " -- " + python() + " " + script("false_sharing.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::string bytes = read_file(good);
  fs::remove(good);
  const std::string truncated = temp("trunc.tpk"), flipped = temp("flip.tpk");
  write_file_atomic(truncated, bytes.substr(0, bytes.size() / 2));
  bytes[bytes.size() - 10] ^= 0x20;
  write_file_atomic(flipped, bytes);
  for (const auto& path : {truncated, flipped}) {
    const Proc s = run(tierpack_bin() + " profile --summary " + path);
    EXPECT_EQ(s.status, 1) << s.output;
    EXPECT_NE(s.output.find(path), std::string::npos) << s.output;
    EXPECT_EQ(std::count(s.output.begin(), s.output.end(), '\n'), 1) << "one line: " << s.output;
    fs::remove(path);
  }
}

// `--python-source off` (TIERPACK_CONF python_source:off): no stack is walked, no tensor has a source.
TEST(TorchProfile, PythonSourceOffRecordsNoLines) {
  const std::string path = temp("source_off.tpk");
  const Proc r = run(tierpack_bin() + " profile --verbose --python-source off -o " + path + " -- " + python() + " " +
                     script("source_lines.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("python sources: none"), std::string::npos) << r.output;
  const Profile p = read_profile(path);
  EXPECT_TRUE(p.sources.empty());
  EXPECT_FALSE(p.tensors.empty());
  const Proc bad = run(tierpack_bin() + " profile --python-source maybe -o " + path + " -- true");
  EXPECT_EQ(bad.status, 2) << bad.output;
}

// Note [Python source]: each tensor carries the line of the script that allocated it, in the profile, the
// summary (text and JSON), the report's tables and the memory_viz snapshot's frames.
TEST(TorchProfile, TensorsCarryThePythonLineThatAllocatedThem) {
  const std::string src = script("source_lines.py");
  const int weight_line = tagged_line(src, "weight"), input_line = tagged_line(src, "input"),
            product_line = tagged_line(src, "product");
  ASSERT_TRUE(weight_line > 0 && input_line > 0 && product_line > 0);
  const std::string path = temp("source.tpk");
  const Proc r = run(tierpack_bin() + " profile --verbose -o " + path + " -- " + python() + " " + src);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("python sources: "), std::string::npos) << r.output;
  const Profile p = read_profile(path);
  auto with_source = [&](std::uint64_t bytes, int line) {
    for (const auto& t : p.tensors) {
      const SourceLocation* s = p.source_of(t);
      if (t.bytes == bytes && s && s->line == line) return &t;
    }
    return static_cast<const TensorRecord*>(nullptr);
  };
  const TensorRecord* weight = with_source(8000, weight_line);
  ASSERT_NE(weight, nullptr) << "the parameter, allocated in warm-up";
  EXPECT_EQ(weight->seq, -1);
  EXPECT_EQ(p.source_of(*weight)->file, src);
  EXPECT_EQ(p.source_of(*weight)->function, "__init__");
  const TensorRecord* input = with_source(24000, input_line);
  ASSERT_NE(input, nullptr);
  EXPECT_GE(input->seq, 0);
  EXPECT_EQ(p.source_of(*input)->function, "make_input");
  const TensorRecord* product = with_source(8000, product_line);
  ASSERT_NE(product, nullptr);
  EXPECT_GE(product->seq, 0);
  const std::string product_text = "source_lines.py:" + std::to_string(product_line) + " forward";
  EXPECT_EQ(p.source_text(*product), product_text);
  // No tensor is attributed to torch's own files (nn.Module.__call__, torch.nn.functional).
  for (const auto& s : p.sources) EXPECT_EQ(s.file.find("/torch/"), std::string::npos) << s.file;

  const Proc summary = run(tierpack_bin() + " profile --summary " + path);
  ASSERT_EQ(summary.status, 0) << summary.output;
  EXPECT_NE(summary.output.find(product_text), std::string::npos) << summary.output;
  EXPECT_NE(summary.output.find("source_lines.py:" + std::to_string(input_line) + " make_input"), std::string::npos)
      << summary.output;
  const Proc json = run(tierpack_bin() + " profile --summary " + path + " --json");
  ASSERT_EQ(json.status, 0) << json.output;
  bool in_json = false;
  const auto summary_json = nlohmann::json::parse(json.output);
  for (const auto& t : summary_json.at("top_tensors"))
    if (t.at("source").is_object() && t["source"].at("line") == product_line && t["source"].at("file") == src)
      in_json = t["source"].at("text") == product_text;
  EXPECT_TRUE(in_json) << json.output;

  const std::string dir = temp("source_report");
  const Proc report = run(tierpack_bin() + " report " + path + " -o " + dir + " --quiet");
  ASSERT_EQ(report.status, 0) << report.output;
  std::ifstream html_in(dir + "/index.html");
  const std::string html((std::istreambuf_iterator<char>(html_in)), {});
  EXPECT_NE(html.find(product_text), std::string::npos) << "the top-tensors table names the line";
  std::ifstream snap_in(dir + "/memory_snapshot.json");
  const auto snap = nlohmann::json::parse(snap_in);
  bool framed = false;
  for (const auto& trace : snap.at("device_traces"))
    for (const auto& e : trace)
      if (e.at("action") == "alloc" && e.at("frames").size() == 2 &&
          e["frames"][1].at("filename") == src && e["frames"][1].at("line") == product_line &&
          e["frames"][1].at("name") == "forward in Net")  // the root module, by its class (Note [Module paths])
        framed = true;
  EXPECT_TRUE(framed) << "an alloc whose second frame is the script's line";
  fs::remove(path);
  fs::remove_all(dir);
}
