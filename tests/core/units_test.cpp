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

// Issue 26, "config that lies": "0.5" was a 1-byte budget, "50" a 50-byte one (both ran all but
// untiered), "-5%" said "expected a number", and a 10 KB bad value was echoed whole.
TEST(Units, BudgetTyposAreErrorsThatSayWhatWouldBeAccepted) {
  auto error_of = [](std::string_view text) {
    try {
      parse_budget(text);
    } catch (const logic_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("0.5").find("invalid size '0.5': not a whole number of bytes"), std::string::npos)
      << error_of("0.5");
  EXPECT_NE(error_of("0.5").find("50%"), std::string::npos) << error_of("0.5");
  EXPECT_NE(error_of("50").find("50 bytes is less than one page"), std::string::npos) << error_of("50");
  EXPECT_NE(error_of("-5%").find("must not be negative"), std::string::npos) << error_of("-5%");
  EXPECT_NE(error_of("-5G").find("must not be negative"), std::string::npos) << error_of("-5G");
  EXPECT_EQ(parse_budget("4096").resolve(1), 4096u);  // a bare whole number of at least a page is bytes
  EXPECT_EQ(parse_budget("0.5G").resolve(1), 512ull << 20);
  // A fraction of a unit rounds down to whole bytes (bench/gpu's --context 0.67G): only bytes must be whole.
  EXPECT_EQ(parse_bytes("0.67G"), static_cast<std::uint64_t>(0.67 * (1ull << 30)));
  EXPECT_NE(error_of("0.5B").find("not a whole number of bytes"), std::string::npos) << error_of("0.5B");
  const std::string huge(10000, 'x');
  const std::string msg = error_of(huge);
  EXPECT_LT(msg.size(), 300u) << msg;
  EXPECT_NE(msg.find("(10000 characters)"), std::string::npos) << msg;
}

TEST(Units, Formats) {
  EXPECT_EQ(format_bytes(12), "12 B");
  EXPECT_EQ(format_bytes(3ull << 29), "1.50 GiB");
  EXPECT_EQ(format_duration_ns(2.5e6), "2.50 ms");
}
