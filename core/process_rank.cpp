// ProcessRank: the distributed launcher's environment and per-rank path patterns (see the header).
#include "core/process_rank.hpp"

#include <charconv>
#include <cstdlib>

#include "core/error.hpp"

namespace tierpack {
namespace {

std::optional<int> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  const std::string_view s(v);
  int out = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || end != s.data() + s.size() || out < 0)
    throw logic_error(std::string("$") + name + " must be a non-negative integer, not '" + std::string(s) + "'");
  return out;
}

}  // namespace

std::optional<ProcessRank> process_rank_from_env() {
  const auto rank = env_int("RANK");
  const auto local = env_int("LOCAL_RANK");
  if (!rank && !local) return std::nullopt;
  ProcessRank r;
  r.rank = rank.value_or(*local);
  r.local_rank = local.value_or(r.rank);
  r.world_size = env_int("WORLD_SIZE").value_or(r.rank + 1);
  if (r.world_size < 1 || r.rank >= r.world_size)
    throw logic_error("$RANK " + std::to_string(r.rank) + " is outside $WORLD_SIZE " + std::to_string(r.world_size));
  return r;
}

std::string expand_rank_pattern(std::string_view pattern, int rank) {
  std::string out;
  out.reserve(pattern.size() + 4);
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && (pattern[i + 1] == 'r' || pattern[i + 1] == '%')) {
      if (pattern[i + 1] == 'r')
        out += std::to_string(rank);
      else
        out += '%';
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

bool has_rank_pattern(std::string_view pattern) {
  for (std::size_t i = 0; i + 1 < pattern.size(); ++i) {
    if (pattern[i] != '%') continue;
    if (pattern[i + 1] == 'r') return true;
    ++i;  // "%%" is a literal '%': its second '%' starts nothing
  }
  return false;
}

std::string device_sibling_path(std::string_view path, int device, std::string_view suffix) {
  std::string base(path);
  const std::size_t slash = base.find_last_of('/'), dot = base.find_last_of('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) base.resize(dot);
  return base + ".gpu" + (device < 0 ? std::string("%d") : std::to_string(device)) + std::string(suffix);
}

}  // namespace tierpack
