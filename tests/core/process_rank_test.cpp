// Per-rank paths and the launcher's environment (core/process_rank.hpp).
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/process_rank.hpp"

using namespace tierpack;

namespace {

/// Sets (or, with nullptr, unsets) an environment variable for one test and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST(ProcessRank, ExpandsRankAndLiteralPercent) {
  EXPECT_EQ(expand_rank_pattern("out.%r.tpk", 3), "out.3.tpk");
  EXPECT_EQ(expand_rank_pattern("/a/%r/b.%r", 12), "/a/12/b.12");
  EXPECT_EQ(expand_rank_pattern("100%%-%r", 0), "100%-0");
  EXPECT_EQ(expand_rank_pattern("50%.tpk", 1), "50%.tpk");  // a lone '%' stays
  EXPECT_EQ(expand_rank_pattern("trailing%", 1), "trailing%");
  EXPECT_TRUE(has_rank_pattern("out.%r.tpk"));
  EXPECT_FALSE(has_rank_pattern("out.%%r.tpk"));  // a literal "%r"
  EXPECT_FALSE(has_rank_pattern("out.tpk"));
}

TEST(ProcessRank, ReadsTorchrunsEnvironment) {
  ScopedEnv r("RANK", "1"), w("WORLD_SIZE", "4"), l("LOCAL_RANK", "1");
  const auto rank = process_rank_from_env();
  ASSERT_TRUE(rank);
  EXPECT_EQ(rank->rank, 1);
  EXPECT_EQ(rank->world_size, 4);
  EXPECT_EQ(rank->local_rank, 1);
}

TEST(ProcessRank, NoneOutsideADistributedJob) {
  ScopedEnv r("RANK", nullptr), w("WORLD_SIZE", nullptr), l("LOCAL_RANK", nullptr);
  EXPECT_FALSE(process_rank_from_env());
}

TEST(ProcessRank, BadValuesAreClearErrors) {
  {
    ScopedEnv r("RANK", "one"), l("LOCAL_RANK", nullptr);
    EXPECT_THROW(process_rank_from_env(), logic_error);
  }
  {
    ScopedEnv r("RANK", "2"), w("WORLD_SIZE", "2"), l("LOCAL_RANK", nullptr);
    try {
      (void)process_rank_from_env();
      FAIL() << "rank outside the world accepted";
    } catch (const logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("outside $WORLD_SIZE"), std::string::npos) << e.what();
    }
  }
}

TEST(ProcessRank, ConfigFromEnvExpandsPerRankPaths) {
  ScopedEnv r("RANK", "1"), w("WORLD_SIZE", "2"), l("LOCAL_RANK", "1");
  ScopedEnv conf("TIERPACK_CONF", "mode:profile,profile_out:/tmp/out.%r.tpk,stats_out:/tmp/s.%r.json");
  const Config c = config_from_env();
  EXPECT_EQ(c.profile_out, "/tmp/out.1.tpk");
  EXPECT_EQ(c.stats_out, "/tmp/s.1.json");
}

// The configuration text a program passes itself (tierpack.cuda.install(conf=...) under torchrun).
TEST(ProcessRank, ConfigForProcessExpandsPerRankPathsOfAnyText) {
  ScopedEnv r("RANK", "3"), w("WORLD_SIZE", "4"), l("LOCAL_RANK", "1");
  const Config c = config_for_process("stats_out:/tmp/s.%r.json,profile_out:/tmp/o.%r.tpk");
  EXPECT_EQ(c.stats_out, "/tmp/s.3.json");
  EXPECT_EQ(c.profile_out, "/tmp/o.3.tpk");
}

TEST(ProcessRank, ConfigFromEnvUsesRankZeroForOneProcess) {
  ScopedEnv r("RANK", nullptr), w("WORLD_SIZE", nullptr), l("LOCAL_RANK", nullptr);
  ScopedEnv conf("TIERPACK_CONF", "mode:profile,profile_out:/tmp/out.%r.tpk");
  EXPECT_EQ(config_from_env().profile_out, "/tmp/out.0.tpk");
}

TEST(ProcessRank, DeviceSiblingPathReplacesTheExtension) {
  EXPECT_EQ(device_sibling_path("/tmp/run.tpk", 0, ".tpk"), "/tmp/run.gpu0.tpk");
  EXPECT_EQ(device_sibling_path("/tmp/s.1.json", 3, ".json"), "/tmp/s.1.gpu3.json");
  EXPECT_EQ(device_sibling_path("out.d/stats", 1, ".json"), "out.d/stats.gpu1.json") << "a dot in a folder is not an extension";
  EXPECT_EQ(device_sibling_path("run.tpk", -1, ".tpk"), "run.gpu%d.tpk");
}
