// Small helpers shared by core's JSON (de)serialisers. Private to core/.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <initializer_list>
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

// Note [Field ranges]
// ~~~~~~~~~~~~~~~~~~~
// Every file reader checks each field once, here at the edge, so nothing downstream sees a value it
// cannot compute with: a count of bytes is at most kMaxBytes (sums of them then fit in an int64 with
// room to spare, see kMaxTotalBytes), a time or duration at most kMaxNs, and a field of the wrong
// type, a missing required field or an unknown one is a format_error that names the field (and the
// caller adds the record: "tensor 37: field 'bytes' = ... is out of range (at most 2^48)").
// nlohmann's own messages ("[json.exception.type_error.302] type must be number") never reach users.

/// Most bytes one tensor, page group, move or tier may have (256 TiB).
inline constexpr std::uint64_t kMaxBytes = 1ull << 48;
inline constexpr std::string_view kMaxBytesText = "2^48";
/// Most bytes a file's tensors (or groups) may add up to.
inline constexpr std::uint64_t kMaxTotalBytes = 1ull << 60;
inline constexpr std::string_view kMaxTotalBytesText = "2^60";
/// Longest time or duration in nanoseconds (about 104 days).
inline constexpr std::uint64_t kMaxNs = 1ull << 53;
inline constexpr std::string_view kMaxNsText = "2^53 ns";

/// Largest page size (1 GiB huge pages).
inline constexpr std::uint64_t kMaxPageSize = 1ull << 30;
inline constexpr std::string_view kMaxPageSizeText = "2^30";

constexpr bool is_power_of_two(std::uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

/// Highest CUDA device or NUMA node number a file may name.
inline constexpr int kMaxDevice = 1023;

/// nlohmann's message without its "[json.exception.type_error.302] " prefix.
inline std::string json_error_text(const std::exception& e) {
  std::string_view m = e.what();
  if (m.starts_with("[json.exception.")) {
    const auto close = m.find("] ");
    if (close != std::string_view::npos) m.remove_prefix(close + 2);
  }
  return std::string(m);
}

/// A value as it appears in messages, cut short.
inline std::string shown(const nlohmann::json& j) {
  std::string text = j.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

[[noreturn]] inline void wrong_type(const nlohmann::json& j, std::string_view expected) {
  throw format_error("= " + shown(j) + " must be " + std::string(expected) + ", not " + j.type_name());
}

/// Reads a JSON value into v like j.get_to(v), but a number must fit v's type and a value of the
/// wrong type says what was expected. nlohmann converts numbers with static_cast: an out-of-range
/// integer wraps silently (a negative step time became 97 years) and an out-of-range floating value
/// is undefined behaviour (found by tests/fuzz). All are format_errors here, phrased to follow
/// "field 'NAME' " (Note [Field ranges]).
template <class T>
void read(const nlohmann::json& j, T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) wrong_type(j, "true or false");
    v = j.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    using L = std::numeric_limits<T>;
    auto bad = [&] {
      throw format_error("= " + shown(j) + " is out of range (" + std::to_string(+L::min()) + " to " +
                         std::to_string(+L::max()) + ")");
    };
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
      wrong_type(j, "a whole number");
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!j.is_number()) wrong_type(j, "a number");
    v = j.get<T>();
    if (!std::isfinite(v)) throw format_error("= " + shown(j) + " is not finite");
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) wrong_type(j, "a string");
    v = j.get<std::string>();
  } else if constexpr (is_number_vector<T>::value) {
    if (!j.is_array()) wrong_type(j, "a list of numbers");
    v.clear();
    v.reserve(j.size());
    for (std::size_t i = 0; i < j.size(); ++i) {
      try {
        read(j[i], v.emplace_back());
      } catch (const format_error& e) {
        throw format_error("element " + std::to_string(i) + " " + e.what());
      }
    }
  } else {
    if constexpr (std::is_class_v<T> && !std::is_same_v<T, nlohmann::json>) {
      // A record (from_json of a struct): must be an object or, for a vector of them, a list.
      if (j.is_null()) wrong_type(j, "a record or list");
    }
    try {
      j.get_to(v);
    } catch (const nlohmann::json::exception& e) {
      throw format_error(json_error_text(e));
    }
  }
}

/// Prefixes a message from read() with the field it came from: "field 'bytes' = ...", and a nested
/// one's path: "field 'topology.tiers' ...".
[[noreturn]] inline void rethrow_for_field(std::string_view key, const format_error& e) {
  const std::string_view m = e.what();
  if (m.starts_with("field '")) throw format_error("field '" + std::string(key) + "." + std::string(m.substr(7)));
  throw format_error("field '" + std::string(key) + "'" +
                     (m.starts_with("=") || m.starts_with("element") ? " " : ": ") + std::string(m));
}

/// The object j, or a format_error saying what it is instead.
inline void expect_object(const nlohmann::json& j) {
  if (!j.is_object()) wrong_type(j, "an object");
}

/// Reads a required key.
template <class T>
void get(const nlohmann::json& j, std::string_view key, T& v) {
  expect_object(j);
  const auto it = j.find(key);
  if (it == j.end()) throw format_error("missing field '" + std::string(key) + "'");
  try {
    read(*it, v);
  } catch (const format_error& e) {
    rethrow_for_field(key, e);
  }
}

/// Fails unless lo <= v <= hi, naming the field; hi_text says hi in words ("2^48").
template <class T>
void check_range(std::string_view key, T v, T lo, T hi, std::string_view hi_text = {}) {
  if (v >= lo && v <= hi) return;
  std::string value = std::to_string(v);
  if constexpr (std::is_floating_point_v<T>) value = nlohmann::json(v).dump();
  const std::string bound =
      v < lo ? "at least " + (std::is_floating_point_v<T> ? nlohmann::json(lo).dump() : std::to_string(lo))
             : "at most " + (hi_text.empty() ? std::to_string(hi) : std::string(hi_text));
  throw format_error("field '" + std::string(key) + "' = " + value + " is out of range (" + bound + ")");
}

/// Reads a required key and checks its range.
template <class T>
void get(const nlohmann::json& j, std::string_view key, T& v, T lo, T hi, std::string_view hi_text = {}) {
  get(j, key, v);
  check_range(key, v, lo, hi, hi_text);
}

/// Fails on a key of j that is not in `known` (a misspelt or corrupted key must not leave its field
/// at the default silently).
inline void check_keys(const nlohmann::json& j, std::initializer_list<std::string_view> known) {
  expect_object(j);
  for (const auto& [key, value] : j.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string accepted;
    for (auto k : known) accepted += (accepted.empty() ? "" : ", ") + std::string(k);
    const std::string shown_key = key.size() > 40 ? key.substr(0, 37) + "..." : key;
    throw format_error("unknown field '" + shown_key + "' (accepted: " + accepted + ")");
  }
}

/// Reads a list of records under `key`, each with from_json; an error names the record
/// ("tensor 37: field 'bytes' ...").
template <class T>
void get_records(const nlohmann::json& j, std::string_view key, std::string_view record, std::vector<T>& v,
                 bool required = true) {
  expect_object(j);
  const auto it = j.find(key);
  v.clear();
  if (it == j.end()) {
    if (required) throw format_error("missing field '" + std::string(key) + "'");
    return;
  }
  if (!it->is_array()) {
    try {
      wrong_type(*it, "a list");
    } catch (const format_error& e) {
      rethrow_for_field(key, e);
    }
  }
  v.reserve(it->size());
  for (std::size_t i = 0; i < it->size(); ++i) {
    try {
      expect_object((*it)[i]);
      from_json((*it)[i], v.emplace_back());
    } catch (const format_error& e) {
      throw format_error(std::string(record) + " " + std::to_string(i) + ": " + e.what());
    } catch (const nlohmann::json::exception& e) {
      throw format_error(std::string(record) + " " + std::to_string(i) + ": " + json_error_text(e));
    }
  }
}

template <class T>
void put_optional(nlohmann::json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

template <class T>
void get_optional(const nlohmann::json& j, std::string_view key, std::optional<T>& v) {
  expect_object(j);
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    v.reset();
    return;
  }
  try {
    read(*it, v.emplace());
  } catch (const format_error& e) {
    rethrow_for_field(key, e);
  }
}

/// Reads an optional key with a default.
template <class T>
void get_or(const nlohmann::json& j, std::string_view key, T& v) {
  expect_object(j);
  auto it = j.find(key);
  if (it == j.end()) return;
  try {
    read(*it, v);
  } catch (const format_error& e) {
    rethrow_for_field(key, e);
  }
}

/// get_or, then checks the range.
template <class T>
void get_or(const nlohmann::json& j, std::string_view key, T& v, T lo, T hi, std::string_view hi_text = {}) {
  get_or(j, key, v);
  check_range(key, v, lo, hi, hi_text);
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

/// Checks that a page size read under `key` is a power of two (its range is checked by get/get_or).
inline void check_page_size(std::string_view key, std::uint64_t v) {
  if (!is_power_of_two(v))
    throw format_error("field '" + std::string(key) + "' = " + std::to_string(v) + " is not a power of two");
}

/// 16 lower-case hex digits (a profile identity: Note [Profile identity] in core/profile.hpp).
inline std::string hex16(std::uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = kDigits[v & 0xf];
  return s;
}

/// Checks a profile identity read under `key`: empty (unknown) or 1-64 characters of [0-9a-z-], so
/// that it can be printed in a one-line message as it is.
inline void check_profile_id(std::string_view key, const std::string& v) {
  const bool ok = v.size() <= 64 && std::all_of(v.begin(), v.end(), [](char c) {
                    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-';
                  });
  if (!ok)
    throw format_error("field '" + std::string(key) + "' = " + shown(nlohmann::json(v)) +
                       " is not a profile identity (up to 64 of 0-9, a-z, '-')");
}

/// Reads a required string key and converts it with parse (which throws logic_error on a bad name).
template <class F>
auto get_parsed(const nlohmann::json& j, std::string_view key, F&& parse) {
  std::string text;
  get(j, key, text);
  try {
    return parse(text);
  } catch (const logic_error& e) {
    throw format_error("field '" + std::string(key) + "': " + e.what());
  }
}

template <class E, std::size_t N>
std::string_view enum_name(E e, const std::pair<std::string_view, E> (&table)[N]) {
  for (const auto& [n, v] : table)
    if (v == e) return n;
  return "unknown";
}

}  // namespace tierpack::detail
