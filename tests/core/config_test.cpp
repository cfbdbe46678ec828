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
    EXPECT_NE(std::string(e.what()).find("python_source must be on or off"), std::string::npos) << e.what();
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
