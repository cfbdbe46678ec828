#include "core/units.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

using namespace tierpack;

TEST(Units, ParsesByteSizes) {
  EXPECT_EQ(parse_bytes("4096"), 4096u);
  EXPECT_EQ(parse_bytes("24G"), 24ull << 30);
  EXPECT_EQ(parse_bytes("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_bytes("1.5g"), 3ull << 29);
  EXPECT_EQ(parse_bytes("2KB"), 2048u);
}

TEST(Units, RejectsBadSizes) {
  EXPECT_THROW(parse_bytes(""), logic_error);
  EXPECT_THROW(parse_bytes("G"), logic_error);
  EXPECT_THROW(parse_bytes("12X"), logic_error);
  EXPECT_THROW(parse_bytes("-3G"), logic_error);
  EXPECT_THROW(parse_bytes("99999999999T"), logic_error);
}

TEST(Units, ParsesBandwidthAndLatency) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("55GB/s"), 55e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("36G/s"), 36e9);
  EXPECT_THROW(parse_bandwidth("55GB"), logic_error);
  bool rel = false;
  EXPECT_DOUBLE_EQ(parse_latency_ns("+80ns", &rel), 80.0);
  EXPECT_TRUE(rel);
  EXPECT_DOUBLE_EQ(parse_latency_ns("1.5us", &rel), 1500.0);
  EXPECT_FALSE(rel);
  EXPECT_THROW(parse_latency_ns("80", nullptr), logic_error);
}

TEST(Units, Budgets) {
  Budget b = parse_budget("20%");
  ASSERT_TRUE(b.fraction.has_value());
  EXPECT_EQ(b.resolve(1000), 200u);
  b = parse_budget("4G");
  EXPECT_EQ(b.resolve(1), 4ull << 30);
  EXPECT_THROW(parse_budget("0"), logic_error);
  EXPECT_THROW(parse_budget("150%"), logic_error);
  EXPECT_THROW(parse_budget("abc%"), logic_error);
}

TEST(Units, Formats) {
  EXPECT_EQ(format_bytes(12), "12 B");
  EXPECT_EQ(format_bytes(3ull << 29), "1.50 GiB");
  EXPECT_EQ(format_duration_ns(2.5e6), "2.50 ms");
}
