// Small helpers shared by core's JSON (de)serialisers. Private to core/.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace tierpack::detail {

template <class T>
struct is_number_vector : std::false_type {};
template <class T, class A>
struct is_number_vector<std::vector<T, A>> : std::is_arithmetic<T> {};

/// Reads a JSON value into v like j.get_to(v), but a number must fit v's type. nlohmann converts
/// numbers with static_cast: an out-of-range integer wraps silently and an out-of-range floating
/// value is undefined behaviour (found by tests/fuzz). Both are format_errors here.
template <class T>
void read(const nlohmann::json& j, T& v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using L = std::numeric_limits<T>;
    auto bad = [&] { throw format_error("number " + j.dump() + " out of range for its field"); };
    if (j.is_number_unsigned()) {
      const auto x = j.get<std::uint64_t>();
      if (x > static_cast<std::uint64_t>(L::max())) bad();
      v = static_cast<T>(x);
    } else if (j.is_number_integer()) {
      const auto x = j.get<std::int64_t>();
      if (x < static_cast<std::int64_t>(L::min()) || (x > 0 && static_cast<std::uint64_t>(x) > static_cast<std::uint64_t>(L::max()))) bad();
      v = static_cast<T>(x);
    } else if (j.is_number_float()) {
      // Whole numbers only, strictly inside T's range (2^digits is exact in a double).
      const double x = j.get<double>(), limit = std::ldexp(1.0, L::digits);
      if (!std::isfinite(x) || x != std::trunc(x) || x >= limit || x < (L::is_signed ? -limit : 0.0)) bad();
      v = static_cast<T>(x);
    } else {
      j.get_to(v);  // not a number: nlohmann's type_error names what it found
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    j.get_to(v);
    if (!std::isfinite(v)) throw format_error("number " + j.dump() + " is not finite");
  } else if constexpr (is_number_vector<T>::value) {
    if (!j.is_array()) j.get_to(v);  // type_error
    v.clear();
    v.reserve(j.size());
    for (const auto& e : j) read(e, v.emplace_back());
  } else {
    j.get_to(v);
  }
}

template <class T>
void put_optional(nlohmann::json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

template <class T>
void get_optional(const nlohmann::json& j, const char* key, std::optional<T>& v) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) v.reset();
  else read(*it, v.emplace());
}

/// Reads an optional key with a default.
template <class T>
void get_or(const nlohmann::json& j, const char* key, T& v) {
  auto it = j.find(key);
  if (it != j.end()) read(*it, v);
}

/// Maps an enum from its name; unknown names are format_errors naming the accepted values.
template <class E, std::size_t N>
E enum_from_name(std::string_view what, std::string_view name, const std::pair<std::string_view, E> (&table)[N]) {
  std::string accepted;
  for (const auto& [n, e] : table) {
    if (n == name) return e;
    accepted += (accepted.empty() ? "" : ", ") + std::string(n);
  }
  throw format_error("unknown " + std::string(what) + " '" + std::string(name) + "' (accepted: " + accepted + ")");
}

template <class E, std::size_t N>
std::string_view enum_name(E e, const std::pair<std::string_view, E> (&table)[N]) {
  for (const auto& [n, v] : table)
    if (v == e) return n;
  return "unknown";
}

}  // namespace tierpack::detail
