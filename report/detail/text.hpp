// Text helpers shared by the report's writers: numbers for humans, HTML escaping, JSON number
// formatting that never prints NaN or exponent surprises. Private to report/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tierpack::report::detail {

/// "12,345"
std::string with_commas(std::uint64_t n);
/// "46.6 GiB" (one decimal above 10, two below; B/KiB/MiB/GiB/TiB)
std::string bytes_short(std::uint64_t bytes);
/// "232 ms", "1.50 s", "45.0 us"
std::string duration_short(double ns);
/// "37%" / "0.4%"
std::string percent(double part, double whole);
/// A finite double as JSON text with up to `decimals` decimals, trailing zeros trimmed ("12.5", "3").
std::string json_number(double v, int decimals = 3);

}  // namespace tierpack::report::detail
