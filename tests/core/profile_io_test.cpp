#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/file_envelope.hpp"
#include "core/profile.hpp"

using namespace tierpack;
namespace fs = std::filesystem;

namespace {

Profile small_profile() {
  Profile p;
  p.meta.tool_version = "test";
  p.meta.command = "python train.py";
  p.meta.framework = "synthetic";
  Tier dram;
  dram.kind = TierKind::host_dram;
  dram.name = "dram0";
  dram.numa_node = 0;
  dram.capacity_bytes = 1ull << 34;
  dram.bandwidth_bytes_per_s = 2e11;
  p.topology.add(dram);
  for (int i = 0; i < 3; ++i) {
    OpRecord op;
    op.index = i;
    op.name = "aten::op" + std::to_string(i);
    op.begin_ns = 100u * i;
    op.end_ns = 100u * i + 50;
    op.phase = Phase::forward;
    p.ops.push_back(op);
  }
  TensorRecord a;
  a.id = 0;
  a.seq = -1;
  a.bytes = 4096;
  a.birth_op = kBeforeIteration;
  a.death_op = kAfterIteration;
  a.uses = {0, 2};
  a.tier = 0;
  a.flags = kTensorParameter;
  TensorRecord b;
  b.id = 1;
  b.seq = 0;
  b.bytes = 1000;
  b.alloc_op = "aten::op0";
  b.birth_op = 0;
  b.death_op = 1;
  b.uses = {0, 1};
  p.tensors = {a, b};
  p.ops[0].outputs = {1};
  p.ops[1].inputs = {1};
  PageRecord page;
  page.address = 0x1000;
  page.tensors = {0, 1};
  page.false_shared = true;
  p.pages.push_back(page);
  p.iterations.push_back({1, 300, 1, 0xabc, true});
  p.divergences.push_back({3, 7, "size 4096 != 8192 at seq 7"});
  p.iteration_ns = 300;
  return p;
}

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("tierpack_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

std::string error_of(const std::string& path) {
  try {
    read_profile(path);
  } catch (const error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ProfileIo, RoundTrips) {
  const Profile p = small_profile();
  const std::string path = temp_path("rt.tpk");
  write_profile(p, path);
  const Profile q = read_profile(path);
  EXPECT_EQ(p, q);
  fs::remove(path);
}

TEST(ProfileIo, RankOfADistributedJobRoundTrips) {
  Profile p = small_profile();
  p.meta.rank = 1;
  p.meta.world_size = 2;
  const std::string path = temp_path("rank.tpk");
  write_profile(p, path);
  const Profile q = read_profile(path);
  EXPECT_EQ(q.meta.rank, 1);
  EXPECT_EQ(q.meta.world_size, 2);
  EXPECT_EQ(p, q);
  fs::remove(path);
  // A profile without them (one process) reads as rank -1.
  EXPECT_EQ(small_profile().meta.rank, -1);
}

TEST(ProfileIo, PeakBytesSweepsLifetimes) {
  const Profile p = small_profile();
  EXPECT_EQ(p.peak_bytes(-1), 5096u);
  EXPECT_EQ(p.peak_bytes(0), 0u);
}

TEST(ProfileIo, TruncatedFileIsClearError) {
  const std::string path = temp_path("trunc.tpk");
  write_profile(small_profile(), path);
  std::string data = slurp(path);
  spit(path, data.substr(0, data.size() / 2));
  const std::string msg = error_of(path);
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  fs::remove(path);
}

TEST(ProfileIo, CorruptByteIsClearError) {
  const std::string path = temp_path("corrupt.tpk");
  write_profile(small_profile(), path);
  std::string data = slurp(path);
  data[data.size() - 10] ^= 0x5a;
  spit(path, data);
  const std::string msg = error_of(path);
  EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
  fs::remove(path);
}

TEST(ProfileIo, NewerVersionIsRejected) {
  const std::string path = temp_path("newer.tpk");
  spit(path, "tierpack-profile 99 2 00000000\n{}");
  const std::string msg = error_of(path);
  EXPECT_NE(msg.find("newer"), std::string::npos) << msg;
  fs::remove(path);
}

TEST(ProfileIo, NotAProfileAndMissingFile) {
  const std::string path = temp_path("garbage.tpk");
  spit(path, "\x7f" "ELF garbage");
  EXPECT_NE(error_of(path).find("not a tierpack-profile file"), std::string::npos);
  fs::remove(path);
  EXPECT_THROW(read_profile(temp_path("does-not-exist.tpk")), os_error);
}

TEST(ProfileIo, ValidPayloadWithBadReferencesIsRejected) {
  Profile p = small_profile();
  p.ops[1].inputs = {42};  // no tensor 42
  const std::string path = temp_path("badref.tpk");
  write_profile(p, path);
  const std::string msg = error_of(path);
  EXPECT_NE(msg.find("unknown tensor 42"), std::string::npos) << msg;
  fs::remove(path);
}

TEST(ProfileIo, WellFormedEnvelopeWithBadJson) {
  const std::string path = temp_path("badjson.tpk");
  write_envelope(path, "tierpack-profile", 1, "{\"meta\": 3");
  const std::string msg = error_of(path);
  EXPECT_NE(msg.find("invalid profile"), std::string::npos) << msg;
  fs::remove(path);
}

TEST(ProfileIo, UnwritableDestinationIsOsError) {
  EXPECT_THROW(write_profile(small_profile(), "/nonexistent-dir/x.tpk"), os_error);
}

// Note [Profile identity] (issue 26, mismatched inputs).
TEST(ProfileIdentity, RoundTripsAndIsCheckedByFilesMadeFromTheProfile) {
  Profile p = small_profile();
  p.meta.id = new_profile_id();
  EXPECT_EQ(p.meta.id.size(), 16u);
  EXPECT_NE(p.meta.id, new_profile_id()) << "drawn at random";
  const std::string path = temp_path("id.tpk");
  write_profile(p, path);
  const Profile q = read_profile(path);
  EXPECT_EQ(q.meta.id, p.meta.id);
  EXPECT_EQ(p, q);
  fs::remove(path);

  EXPECT_EQ(check_profile_identity(p, "a.tpk", p.meta.id, "plan", "a.plan.json"), "");
  try {
    check_profile_identity(p, "a.tpk", "0123456789abcdef", "plan", "b.plan.json");
    ADD_FAILURE() << "another profile's plan was accepted";
  } catch (const logic_error& e) {
    EXPECT_EQ(std::string(e.what()), "b.plan.json is the plan of profile 0123456789abcdef, not of a.tpk (profile " +
                                         p.meta.id + "): give the plan made from that profile");
  }
  EXPECT_NE(check_profile_identity(p, "a.tpk", "", "run statistics", "s.json").find("s.json: identity unknown"),
            std::string::npos);
  EXPECT_NE(check_profile_identity(small_profile(), "old.tpk", "0123456789abcdef", "plan", "p.json")
                .find("old.tpk was written before profiles carried one"),
            std::string::npos);
}

TEST(ProfileIdentity, ABadIdentityIsAFieldError) {
  nlohmann::json j = small_profile();
  j["meta"]["id"] = "../../etc";
  const std::string path = temp_path("bad_id.tpk");
  write_envelope(path, "tierpack-profile", 1, j.dump());
  try {
    (void)read_profile(path);
    ADD_FAILURE() << "accepted";
  } catch (const format_error& e) {
    EXPECT_NE(std::string(e.what()).find("field 'meta.id' = \"../../etc\" is not a profile identity"), std::string::npos)
        << e.what();
  }
  fs::remove(path);
}

namespace {

/// `j` parsed as a file of format version `version` says it is.
Profile parse_as_version(nlohmann::json j, int version) {
  j["version"] = version;
  const std::string payload = j.dump();
  char header[96];
  std::snprintf(header, sizeof header, "tierpack-profile %d %zu %08x\n", version, payload.size(), crc32(payload));
  return parse_profile(header + payload, "v" + std::to_string(version) + ".tpk");
}

}  // namespace

// Version 3: a source's module path; one (file, line, function) run in two modules is two sources.
TEST(ProfileIo, AllocationSourcesRoundTrip) {
  Profile p = small_profile();
  p.sources = {{"/home/me/model.py", 63, "forward", "blocks.0.fc"},
               {"<stdin>", 1, "<module>"},
               {"/home/me/model.py", 63, "forward", "blocks.1.fc"}};
  p.tensors[0].source = 1;
  p.tensors[1].source = 2;
  const std::string path = temp_path("sources.tpk");
  write_profile(p, path);
  EXPECT_EQ(slurp(path).rfind("tierpack-profile 3 ", 0), 0u) << "written as version 3";
  const Profile q = read_profile(path);
  EXPECT_EQ(p, q);
  EXPECT_EQ(q.source_text(q.tensors[1]), "model.py:63 forward") << "the line alone, the module apart";
  EXPECT_EQ(q.module_text(q.tensors[1]), "blocks.1.fc");
  EXPECT_EQ(q.source_text(q.tensors[0]), "<stdin>:1 <module>");
  EXPECT_EQ(q.module_text(q.tensors[0]), "") << "no module running";
  EXPECT_EQ(nlohmann::json(q.sources[1]).count("module"), 0u) << "written only when there is one";
  fs::remove(path);
}

TEST(ProfileIo, VersionOneFilesReadWithSourcesUnknown) {
  // A version 1 file as tierpack wrote it before sources existed (the committed example profile).
  const Profile old = read_profile(std::string(TIERPACK_SOURCE_DIR) + "/tests/data/profiles/train_cpu.tpk");
  ASSERT_FALSE(old.tensors.empty());
  EXPECT_TRUE(old.sources.empty());
  for (const auto& t : old.tensors) {
    EXPECT_EQ(t.source, -1) << "tensor " << t.id;
    EXPECT_EQ(old.source_of(t), nullptr);
    EXPECT_EQ(old.source_text(t), "");
  }
  // And one written by hand under a version 1 header.
  nlohmann::json j = small_profile();
  j.erase("sources");
  EXPECT_EQ(parse_as_version(j, 1), small_profile());
}

TEST(ProfileIo, SourceShortText) {
  EXPECT_EQ((SourceLocation{"/a/b/model.py", 63, "forward"}.short_text()), "model.py:63 forward");
  EXPECT_EQ((SourceLocation{"model.py", 0, ""}.short_text()), "model.py");
  EXPECT_EQ((SourceLocation{"", 3, "f"}.short_text()), "");
}

TEST(ProfileIo, VersionTwoFilesReadWithModulesUnknown) {
  nlohmann::json j = small_profile();
  j["sources"] = {{{"file", "/home/me/model.py"}, {"line", 63}, {"function", "forward"}}};
  j["tensors"][0]["source"] = 0;
  const Profile q = parse_as_version(j, 2);
  ASSERT_EQ(q.sources.size(), 1u);
  EXPECT_EQ(q.sources[0].module, "");
  EXPECT_EQ(q.source_text(q.tensors[0]), "model.py:63 forward");
  EXPECT_EQ(q.module_text(q.tensors[0]), "");
}

// Profile::module_text: the source's module, else "(backward)" for a tensor born in a backward op.
TEST(ProfileIo, ModuleTextSaysBackward) {
  Profile p = small_profile();
  p.sources = {{"/home/me/train.py", 40, "<module>"}, {"/home/me/model.py", 63, "forward", "h.3.mlp"}};
  TensorRecord& t = p.tensors[1];
  t.source = 0;
  ASSERT_GE(t.birth_op, 0);
  auto& op = p.ops[static_cast<std::size_t>(t.birth_op)];
  op.phase = Phase::forward;
  EXPECT_EQ(p.module_text(t), "");
  op.phase = Phase::backward;
  EXPECT_EQ(p.module_text(t), "(backward)");
  t.source = 1;
  EXPECT_EQ(p.module_text(t), "h.3.mlp") << "a forward run in backward (checkpointing) names its module";
  t.source = -1;
  EXPECT_EQ(p.module_text(t), "") << "no source, no module";
}
