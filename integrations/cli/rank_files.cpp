// Per-rank output files (see rank_files.hpp).
#include "integrations/cli/rank_files.hpp"

#include <algorithm>
#include <filesystem>
#include <regex>

namespace tierpack::cli {
namespace {

namespace fs = std::filesystem;

/// The file-name part of `pattern` as a regex: `%r` -> a captured number, `%%` -> '%', the rest literal.
std::regex name_regex(const std::string& name) {
  std::string re;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '%' && i + 1 < name.size() && name[i + 1] == 'r') {
      re += "([0-9]+)";
      ++i;
      continue;
    }
    if (c == '%' && i + 1 < name.size() && name[i + 1] == '%') ++i;
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) re += '\\';
    re += c;
  }
  return std::regex(re);
}

}  // namespace

std::vector<RankFile> existing_rank_files(const std::string& pattern) {
  const fs::path p(pattern);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::regex re = name_regex(p.filename().string());
  std::vector<RankFile> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, re) || m.size() < 2) continue;
    // Every %r of one file names the same rank.
    bool same = true;
    for (std::size_t i = 2; i < m.size(); ++i) same = same && m[i].str() == m[1].str();
    if (same && m[1].length() <= 9) out.push_back({std::stoi(m[1].str()), entry.path().string()});
  }
  std::sort(out.begin(), out.end(), [](const RankFile& a, const RankFile& b) { return a.rank < b.rank; });
  return out;
}

void remove_rank_files(const std::string& pattern) {
  for (const auto& f : existing_rank_files(pattern)) {
    std::error_code ec;
    fs::remove(f.path, ec);
  }
}

}  // namespace tierpack::cli
