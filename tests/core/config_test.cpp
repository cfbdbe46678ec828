#include "core/config.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

using namespace tierpack;

TEST(Config, DefaultsWhenEmpty) {
  const Config c = parse_config("");
  EXPECT_EQ(c.mode, RunMode::off);
  EXPECT_FALSE(c.gpu_budget.is_set());
}

TEST(Config, ParsesKeys) {
  const Config c = parse_config("mode:run,gpu_budget:24G,fast_budget:60%,tiers:dram:16G+cxl:64G,page_tracer:uffd,log:debug");
  EXPECT_EQ(c.mode, RunMode::run);
  EXPECT_EQ(c.gpu_budget.resolve(0), 24ull << 30);
  EXPECT_DOUBLE_EQ(*c.fast_budget.fraction, 0.6);
  EXPECT_EQ(c.tiers, "dram:16G+cxl:64G");
  EXPECT_EQ(c.page_tracer, PageTracerKind::uffd);
  EXPECT_EQ(c.log, LogLevel::debug);
}

TEST(Config, PythonSourceIsOnByDefaultAndASwitch) {
  EXPECT_TRUE(parse_config("").python_source);
  const Config off = parse_config("python_source:off");
  EXPECT_FALSE(off.python_source);
  EXPECT_EQ(format_config(off), "python_source:off");
  EXPECT_EQ(parse_config(format_config(off)).python_source, false);
  try {
    parse_config("python_source:maybe");
    FAIL() << "accepted";
  } catch (const logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("key 'python_source' (accepted: on, off)"), std::string::npos) << e.what();
  }
}

TEST(Config, TheHostSideHasNothingToDoWhenARunOnlySetsAGpuBudget) {
  // Note [Host side steps aside]
  EXPECT_FALSE(host_side_needed(parse_config("mode:run,gpu_budget:1G,stats_out:/tmp/s.json")));
  for (const char* conf : {"mode:run,gpu_budget:1G,fast_budget:4G", "mode:run,gpu_budget:1G,profile_out:/tmp/r.tpk",
                           "mode:run,gpu_budget:1G,tiers:dram:64G", "mode:run,gpu_budget:1G,plan:/tmp/p.json", "mode:run",
                           "mode:profile,gpu_budget:1G", "mode:off"})
    EXPECT_TRUE(host_side_needed(parse_config(conf))) << conf;
}

TEST(Config, RoundTrips) {
  const Config c = parse_config("mode:profile,profile_out:/tmp/x.tpk,warmup_iterations:2,gpu_budget:50%");
  const Config d = parse_config(format_config(c));
  EXPECT_EQ(format_config(c), format_config(d));
  EXPECT_EQ(d.profile_out, "/tmp/x.tpk");
  EXPECT_EQ(d.warmup_iterations, 2);
}

TEST(Config, UnknownKeyNamesKeyAndAcceptedKeys) {
  try {
    parse_config("gpu_bugdet:24G");
    FAIL() << "expected an error";
  } catch (const logic_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("gpu_bugdet"), std::string::npos) << msg;
    EXPECT_NE(msg.find("gpu_budget"), std::string::npos) << msg;
  }
}

TEST(Config, SmallByteBudgetsSurviveFormatting) {
  // `tierpack run --fast-budget 2K` passes the budget on in bytes; found by fuzz_config when bare
  // numbers below one page became typos (Note [Budget typos]).
  const Config c = parse_config("fast_budget:2K,gpu_budget:3648B");
  const std::string text = format_config(c);
  EXPECT_NE(text.find("fast_budget:2048B"), std::string::npos) << text;
  EXPECT_NE(text.find("gpu_budget:3648B"), std::string::npos) << text;
  const Config d = parse_config(format_config(c));
  EXPECT_EQ(d.fast_budget.resolve(0), 2048u);
  EXPECT_EQ(d.gpu_budget.resolve(0), 3648u);
}

TEST(Config, BadValueNamesAcceptedValues) {
  try {
    parse_config("mode:fast");
    FAIL() << "expected an error";
  } catch (const logic_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'mode'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("off, profile, run"), std::string::npos) << msg;
  }
  EXPECT_THROW(parse_config("gpu_budget:lots"), logic_error);
  EXPECT_THROW(parse_config("warmup_iterations:-1"), logic_error);
  EXPECT_THROW(parse_config("noseparator"), logic_error);
  EXPECT_THROW(parse_config("profile_out:"), logic_error);
}

namespace {
std::string error_of(std::string_view conf, std::string_view gpu = {}) {
  try {
    parse_config(conf, gpu);
  } catch (const logic_error& e) {
    return e.what();
  }
  return "accepted";
}
}  // namespace

TEST(Config, TheGpuKeysLiveUnderTierpackConfAndTierpackGpuIsTheirAlias) {
  const Config conf = parse_config("gpu_step:stream,gpu_limit:hard,gpu_mechanism:vmm,gpu_chunk:64M,gpu_remap_delay:5");
  const Config alias = parse_config("", "step:stream,limit:hard,mechanism:vmm,chunk:64M,remap_delay:5");
  for (const Config& c : {conf, alias}) {
    EXPECT_TRUE(c.gpu.stream_step);
    EXPECT_TRUE(c.gpu.hard_limit);
    EXPECT_EQ(c.gpu.mechanism, gpu::Mechanism::vmm);
    EXPECT_EQ(c.gpu.chunk_bytes, std::uint64_t{64} << 20);
    EXPECT_EQ(c.gpu.remap_max_delay, std::chrono::milliseconds(5));
  }
  EXPECT_EQ(format_config(conf), format_config(alias));
  EXPECT_EQ(parse_config("", "budget:24G").gpu_budget.resolve(0), std::uint64_t{24} << 30) << "budget is gpu_budget";
  EXPECT_EQ(parse_config("", "profile_out:g%d.tpk").gpu.profile_out, "g%d.tpk") << "not the host's profile_out";
  const Config d;
  EXPECT_FALSE(d.gpu.stream_step);
  EXPECT_FALSE(d.gpu.hard_limit);
  EXPECT_EQ(d.gpu.mechanism, gpu::Mechanism::storage);
}

TEST(Config, AKeyGivenBothWaysMustAgree) {
  const std::string msg = error_of("mode:run,gpu_limit:hard", "limit:soft");
  EXPECT_NE(msg.find("TIERPACK_GPU: 'limit:soft' conflicts with TIERPACK_CONF's 'gpu_limit:hard'"), std::string::npos)
      << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line";
  EXPECT_NE(error_of("gpu_budget:24G", "budget:60%").find("'gpu_budget:24G'"), std::string::npos);
  // The same value, however written, is no conflict.
  EXPECT_EQ(error_of("gpu_limit:hard,gpu_budget:24G", "limit:hard,budget:24576M"), "accepted");
  EXPECT_EQ(error_of("gpu_spill:off", "spill:0"), "accepted");
}

TEST(Config, UnknownAliasKeysListTheAliasKeys) {
  const std::string msg = error_of("", "limt:hard");
  EXPECT_NE(msg.find("TIERPACK_GPU: unknown key 'limt' (accepted keys: budget, mechanism, chunk,"), std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("gpu_"), std::string::npos) << "the alias's own names: " << msg;
  EXPECT_NE(error_of("", "mode:run").find("unknown key 'mode'"), std::string::npos) << "only the gpu_ keys";
  EXPECT_NE(error_of("gpu_limt:hard").find("accepted keys: mode, gpu_budget,"), std::string::npos);
}

TEST(Config, EveryNumberIsRangeCheckedAndTheErrorNamesTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {"gpu_remap_threads:0", "'gpu_remap_threads' (accepted: 1..16)"},
      {"gpu_prewarm_threads:65", "'gpu_prewarm_threads' (accepted: 0..64)"},
      {"gpu_evict_lag:-1", "'gpu_evict_lag' (accepted: 0..100000"},
      {"gpu_divergences:0", "'gpu_divergences' (accepted: 1..1000000)"},
      {"gpu_remap_delay:10001", "'gpu_remap_delay' (accepted: 0..10000"},
      {"gpu_fill:0", "'gpu_fill' (accepted: a number in (0, 1])"},
      {"gpu_headroom:1.5", "'gpu_headroom' (accepted: a number in (0, 1])"},
      {"gpu_chunk:3M", "'gpu_chunk' (accepted: a multiple of 2M)"},
      {"gpu_chunk:0", "'gpu_chunk' (accepted: a multiple of 2M)"},
      {"gpu_group:0", "'gpu_group' (accepted: a size above 0"},
      {"gpu_copy_piece:3K", "'gpu_copy_piece' (accepted: 0 or a multiple of 1M)"},
      {"gpu_host_limit:lots", "'gpu_host_limit' (accepted: a size"},
      {"page_window_depth:0", "'page_window_depth' (accepted: an integer >= 1)"},
      {"warmup_iterations:99999999999", "'warmup_iterations' (accepted: an integer >= 0)"},
  };
  for (const auto& [conf, says] : cases) {
    const std::string msg = error_of(conf);
    EXPECT_NE(msg.find(says), std::string::npos) << conf << ": " << msg;
  }
  EXPECT_NE(error_of("", "remap_threads:0").find("TIERPACK_GPU: invalid value '0' for key 'remap_threads'"),
            std::string::npos);
}

TEST(Config, EveryKeyRoundTripsAndIsReadByName) {
  const Config c = parse_config(
      "mode:run,gpu_budget:60%,stats_out:/tmp/s.json,gpu_mechanism:vmm,gpu_chunk:64M,gpu_spill:off,gpu_headroom:0.7,"
      "gpu_verify:all,gpu_remap:idle,gpu_fill:0.9,gpu_limit:hard,gpu_recompute:off,gpu_gc:as-is,gpu_step:stream,"
      "gpu_compile:whole,gpu_autocast_cache:on,gpu_copies:torch,gpu_plan_out:/tmp/p.json");
  EXPECT_EQ(format_config(parse_config(format_config(c))), format_config(c));
  const nlohmann::json j = settings_json(c);
  EXPECT_EQ(j.at("mode"), "run");
  EXPECT_DOUBLE_EQ(j.at("gpu_budget").at("fraction").get<double>(), 0.6);
  EXPECT_EQ(j.at("gpu_mechanism"), "vmm");
  EXPECT_EQ(j.at("gpu_chunk"), std::uint64_t{64} << 20);
  EXPECT_EQ(j.at("gpu_spill"), false);
  EXPECT_EQ(j.at("gpu_limit"), "hard");
  EXPECT_EQ(j.at("gpu_gc"), "as-is");
  EXPECT_EQ(j.at("gpu_compile"), "whole");
  EXPECT_EQ(settings_json(Config{}).at("gpu_compile"), "blocks") << "the default";
  EXPECT_EQ(j.at("gpu_autocast_cache"), "on");
  EXPECT_EQ(settings_json(Config{}).at("gpu_autocast_cache"), "auto") << "the default";
  EXPECT_EQ(j.at("gpu_copies"), "torch");
  EXPECT_EQ(j.at("gpu_plan_out"), "/tmp/p.json");
  EXPECT_TRUE(settings_json(Config{}).at("gpu_budget").is_null());
  EXPECT_TRUE(settings_json(Config{}).at("gpu_fill").is_null()) << "left to the runtime's default";
  EXPECT_EQ(settings_json(parse_config("gpu_budget:24G")).at("gpu_budget").at("bytes"), std::uint64_t{24} << 30);
  for (std::string_view k : Config::keys()) EXPECT_TRUE(settings_json(c).contains(std::string(k))) << k;
}
