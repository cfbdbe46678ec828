// Byte sizes, bandwidths, latencies and budgets as users write them ("24G", "512MiB", "55GB/s",
// "+80ns", "20%"), parsed strictly: anything malformed is a tierpack::logic_error naming the text.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tierpack {

/// printf into a std::string, for table rows (at most 511 characters: longer text is cut).
template <class... A>
std::string printf_string(const char* format, A... a) {
  char line[512];
  std::snprintf(line, sizeof line, format, a...);
  return line;
}

/// Parses a byte size. Suffixes K/M/G/T (and KiB/MiB/GiB/TiB, KB/MB/GB/TB) are powers of 1024;
/// a bare number is bytes. Fractions are allowed ("1.5G"). Throws logic_error on bad input.
std::uint64_t parse_bytes(std::string_view text);

/// Parses a bandwidth such as "55GB/s" or "36G/s" into bytes per second (decimal: 1 GB/s = 1e9 B/s,
/// as link bandwidths are quoted).
double parse_bandwidth(std::string_view text);

/// Parses a latency such as "80ns", "+80ns", "1.2us" into nanoseconds. A leading '+' is accepted
/// (relative latency); `relative` tells whether it was present.
double parse_latency_ns(std::string_view text, bool* relative = nullptr);

/// A memory budget: either absolute bytes or a fraction of some reference (the profile's peak).
struct Budget {
  std::optional<std::uint64_t> bytes;
  std::optional<double> fraction;  ///< 0 < fraction <= 1 (from "20%")

  /// Absolute bytes given the reference size (peak) a percentage refers to.
  std::uint64_t resolve(std::uint64_t reference) const;
  bool is_set() const { return bytes.has_value() || fraction.has_value(); }
  std::string to_string() const;
};

/// A piece of user input quoted for a one-line message: 'text', cut to its first 60 characters with
/// its length given when longer (a 10 KB bad value is not echoed whole).
std::string quote_input(std::string_view text);

/// Parses "24G" or "20%" into a Budget.
Budget parse_budget(std::string_view text);

/// A budget as the user wrote it, and its value.
struct BudgetPoint {
  std::string label;
  Budget budget;
};
/// "100%,50%,4G" -> budget points (the --budgets lists); throws logic_error naming the bad item.
std::vector<BudgetPoint> parse_budget_list(std::string_view text);

/// "1.50 GiB", "512 KiB", "12 B".
std::string format_bytes(std::uint64_t bytes);

/// "1.23 ms", "450 us", "2.10 s".
std::string format_duration_ns(double ns);

/// Text for HTML or SVG (element content and attribute values): & < > " ' escaped.
std::string html_escape(std::string_view s);

}  // namespace tierpack
