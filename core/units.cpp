// Parsing and formatting of sizes, bandwidths, latencies and budgets (see units.hpp).
#include "core/units.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/error.hpp"

namespace tierpack {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Splits "1.5GiB" into 1.5 and "gib". Throws when no number leads the text.
std::pair<double, std::string> split_number(std::string_view text, const char* what) {
  if (text.starts_with('-'))
    throw logic_error(std::string("invalid ") + what + " " + quote_input(text) + ": must not be negative");
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) throw logic_error(std::string("invalid ") + what + " " + quote_input(text) + ": expected a number");
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + i, value);
  if (ec != std::errc{} || ptr != text.data() + i || !std::isfinite(value))
    throw logic_error(std::string("invalid ") + what + " " + quote_input(text));
  return {value, lower(text.substr(i))};
}

}  // namespace

std::string quote_input(std::string_view text) {
  constexpr std::size_t kShown = 60;
  if (text.size() <= kShown) return "'" + std::string(text) + "'";
  return "'" + std::string(text.substr(0, kShown)) + "...' (" + std::to_string(text.size()) + " characters)";
}

std::uint64_t parse_bytes(std::string_view text) {
  auto [value, unit] = split_number(text, "size");
  double mult = 0;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib") mult = 1024.0;
  else if (unit == "m" || unit == "mb" || unit == "mib") mult = 1024.0 * 1024;
  else if (unit == "g" || unit == "gb" || unit == "gib") mult = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tb" || unit == "tib") mult = 1024.0 * 1024 * 1024 * 1024;
  else
    throw logic_error("invalid size " + quote_input(text) + ": unknown unit " + quote_input(unit) +
                      " (use B, K, M, G or T, e.g. 24G)");
  const double bytes = value * mult;
  if (bytes >= 1.8e19) throw logic_error("invalid size " + quote_input(text) + ": too large");
  // "0.5" rounded to 1 byte: a fraction of a byte written as bytes is a typo (for 50%?), not a size. With a
  // unit ("0.67G") the fraction is the unit's and rounds down to whole bytes.
  if (mult == 1 && bytes != std::floor(bytes))
    throw logic_error("invalid size " + quote_input(text) + ": not a whole number of bytes");
  return static_cast<std::uint64_t>(std::floor(bytes));
}

double parse_bandwidth(std::string_view text) {
  auto [value, unit] = split_number(text, "bandwidth");
  double mult = 0;
  if (unit == "b/s") mult = 1;
  else if (unit == "kb/s" || unit == "k/s") mult = 1e3;
  else if (unit == "mb/s" || unit == "m/s") mult = 1e6;
  else if (unit == "gb/s" || unit == "g/s") mult = 1e9;
  else if (unit == "tb/s" || unit == "t/s") mult = 1e12;
  else
    throw logic_error("invalid bandwidth " + quote_input(text) + ": expected a unit such as GB/s (e.g. 55GB/s)");
  if (value <= 0) throw logic_error("invalid bandwidth " + quote_input(text) + ": must be positive");
  return value * mult;
}

double parse_latency_ns(std::string_view text, bool* relative) {
  bool rel = false;
  if (!text.empty() && text.front() == '+') {
    rel = true;
    text.remove_prefix(1);
  }
  if (relative) *relative = rel;
  auto [value, unit] = split_number(text, "latency");
  if (unit == "ns") return value;
  if (unit == "us") return value * 1e3;
  if (unit == "ms") return value * 1e6;
  throw logic_error("invalid latency " + quote_input(text) + ": expected ns, us or ms (e.g. 80ns)");
}

std::uint64_t Budget::resolve(std::uint64_t reference) const {
  if (bytes) return *bytes;
  if (fraction) return static_cast<std::uint64_t>(std::llround(*fraction * static_cast<double>(reference)));
  return reference;
}

std::string Budget::to_string() const {
  if (bytes) return format_bytes(*bytes);
  if (fraction) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g%%", *fraction * 100.0);
    return buf;
  }
  return "unlimited";
}

// Note [Budget typos]
// ~~~~~~~~~~~~~~~~~~~
// A budget that parses but cannot be meant must not run (nearly) untiered: "0.5" (a fraction of a
// byte: 50%?), "50" (50 bytes, less than one page: 50%? 50G?) and "-5%" are errors that say what
// would be accepted. A bare whole number of at least one page is still bytes (python/tierpack passes
// budgets that way).
Budget parse_budget(std::string_view text) {
  constexpr std::uint64_t kPage = 4096;
  const std::string hint = " (a size with a unit such as 24G, or a percentage of the peak such as 50%)";
  Budget b;
  if (!text.empty() && text.back() == '%') {
    auto [value, unit] = split_number(text.substr(0, text.size() - 1), "budget");
    if (!unit.empty() || value <= 0 || value > 100)
      throw logic_error("invalid budget " + quote_input(text) + ": a percentage must be in (0, 100]");
    b.fraction = value / 100.0;
  } else {
    try {
      b.bytes = parse_bytes(text);
    } catch (const logic_error& e) {
      throw logic_error(std::string(e.what()) + hint);
    }
    if (*b.bytes == 0) throw logic_error("invalid budget " + quote_input(text) + ": must be positive");
    const bool bare = !text.empty() && std::isdigit(static_cast<unsigned char>(text.back()));
    if (bare && *b.bytes < kPage)
      throw logic_error("invalid budget " + quote_input(text) + ": " + std::string(text) +
                        " bytes is less than one page; give a unit or a percentage" + hint);
  }
  return b;
}

std::vector<BudgetPoint> parse_budget_list(std::string_view text) {
  std::vector<BudgetPoint> out;
  for (std::size_t pos = 0; pos <= text.size();) {
    const std::size_t end = std::min(text.find(',', pos), text.size());
    const std::string item(text.substr(pos, end - pos));
    pos = end + 1;
    out.push_back({item, parse_budget(item)});
  }
  return out;
}

std::string format_bytes(std::uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

std::string format_duration_ns(double ns) {
  char buf[48];
  if (ns < 1e3) std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  else if (ns < 1e6) std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
  else if (ns < 1e9) std::snprintf(buf, sizeof buf, "%.2f ms", ns / 1e6);
  else std::snprintf(buf, sizeof buf, "%.2f s", ns / 1e9);
  return buf;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace tierpack
