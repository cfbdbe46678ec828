// Small helpers shared by core's JSON (de)serialisers. Private to core/.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace tierpack::detail {

template <class T>
void put_optional(nlohmann::json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

template <class T>
void get_optional(const nlohmann::json& j, const char* key, std::optional<T>& v) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) v.reset();
  else v = it->get<T>();
}

/// Reads an optional key with a default.
template <class T>
void get_or(const nlohmann::json& j, const char* key, T& v) {
  auto it = j.find(key);
  if (it != j.end()) it->get_to(v);
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
