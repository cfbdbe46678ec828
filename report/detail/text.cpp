// Text helpers for the report (see text.hpp).
#include "report/detail/text.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace tierpack::report::detail {

std::string with_commas(std::uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string bytes_short(std::uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) v /= 1024.0, ++u;
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof buf, v >= 10 ? "%.1f %s" : "%.2f %s", v, units[u]);
  return buf;
}

std::string duration_short(double ns) {
  char buf[32];
  const double a = std::fabs(ns);
  if (a >= 1e9) std::snprintf(buf, sizeof buf, "%.2f s", ns / 1e9);
  else if (a >= 1e6) std::snprintf(buf, sizeof buf, a >= 1e8 ? "%.0f ms" : a >= 1e7 ? "%.1f ms" : "%.2f ms", ns / 1e6);
  else if (a >= 1e3) std::snprintf(buf, sizeof buf, a >= 1e5 ? "%.0f us" : "%.1f us", ns / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  return buf;
}

std::string percent(double part, double whole) {
  if (whole <= 0) return "-";
  const double p = 100.0 * part / whole;
  char buf[32];
  std::snprintf(buf, sizeof buf, (p != 0 && std::fabs(p) < 10) ? "%.1f%%" : "%.0f%%", p);
  return buf;
}

std::string json_number(double v, int decimals) {
  if (!std::isfinite(v)) return "0";
  char buf[400];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals);
  std::string_view s(buf, static_cast<std::size_t>(res.ptr - buf));
  if (s.find('.') != std::string_view::npos) {
    while (s.back() == '0') s.remove_suffix(1);
    if (s.back() == '.') s.remove_suffix(1);
  }
  if (s == "-0") return "0";
  return std::string(s);
}

}  // namespace tierpack::report::detail
