// The merged view of per-rank reports (see rank_overview.hpp).
#include "report/rank_overview.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/units.hpp"
#include "core/version.hpp"
#include "report/detail/file_sink.hpp"
#include "report/detail/text.hpp"

namespace tierpack::report {
namespace {

namespace fs = std::filesystem;
using tierpack::html_escape;

std::uint64_t peak_on(const Profile& p, bool gpu) {
  std::set<int> devices;
  for (const auto& t : p.tensors) devices.insert(t.device);
  std::uint64_t peak = 0;
  for (int d : devices)
    if ((d >= 0) == gpu) peak = std::max(peak, p.peak_bytes(d));
  return peak;
}

std::string render_index(const std::vector<RankReport>& ranks) {
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tierpack: ";
  h += std::to_string(ranks.size()) + " ranks</title>\n<style>\n"
       "body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222}\n"
       "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}\n"
       "th{background:#f3f3f3}td:first-child,th:first-child,td.l{text-align:left}\n"
       ".uneven{background:#fff3d6}ul{margin:.2em 0 1em}\n</style></head><body>\n";
  h += "<h1>tierpack report: " + std::to_string(ranks.size()) + " ranks</h1>\n";
  h += "<p>One row per rank of the distributed job; each rank's full report is linked. The merged "
       "<a href=\"trace.json\">trace.json</a> holds every rank's tracks (open it in ui.perfetto.dev); each rank's "
       "timeline starts at its own profiled iteration. Cells more than 10% above the smallest value of their "
       "column are highlighted: ranks that should be alike but are not.</p>\n";
  struct Row {
    const RankReport* r;
    std::uint64_t host, gpu, iter_ns;
    std::size_t tensors, ops, shared, hidden, divergences;
  };
  std::vector<Row> rows;
  for (const auto& r : ranks) {
    const Profile& p = *r.profile;
    Row row{&r, peak_on(p, false), peak_on(p, true), p.iteration_ns, p.tensors.size(), p.ops.size(), 0, 0,
            p.divergences.size()};
    for (const auto& pg : p.pages) row.shared += pg.false_shared ? 1 : 0;
    for (const auto& t : p.tensors) row.hidden += t.has(kTensorHiddenAccess) ? 1 : 0;
    rows.push_back(row);
  }
  auto min_of = [&](auto field) {
    std::uint64_t m = UINT64_MAX;
    for (const auto& row : rows) m = std::min<std::uint64_t>(m, field(row));
    return m;
  };
  const std::uint64_t min_host = min_of([](const Row& r) { return r.host; });
  const std::uint64_t min_gpu = min_of([](const Row& r) { return r.gpu; });
  const std::uint64_t min_iter = min_of([](const Row& r) { return r.iter_ns; });
  auto cell = [](const std::string& text, std::uint64_t v, std::uint64_t min) {
    const bool uneven = min > 0 && static_cast<double>(v) > 1.1 * static_cast<double>(min);
    return std::string(uneven ? "<td class=\"uneven\">" : "<td>") + html_escape(text) + "</td>";
  };
  h += "<table><tr><th>rank</th><th>profile</th><th>peak host</th><th>peak GPU</th><th>iteration</th>"
       "<th>ops</th><th>tensors</th><th>falsely shared pages</th><th>tensors with hidden accesses</th>"
       "<th>divergent iterations</th><th>report</th></tr>\n";
  for (const auto& row : rows) {
    const RankReport& r = *row.r;
    const std::string world = r.profile->meta.rank >= 0 ? " of " + std::to_string(r.profile->meta.world_size) : "";
    h += "<tr><td>" + std::to_string(r.rank) + html_escape(world) + "</td><td class=\"l\">" +
         html_escape(fs::path(r.profile_path).filename().string()) + "</td>";
    h += cell(format_bytes(row.host), row.host, min_host);
    h += cell(row.gpu ? format_bytes(row.gpu) : "-", row.gpu, min_gpu);
    h += cell(format_duration_ns(static_cast<double>(row.iter_ns)), row.iter_ns, min_iter);
    h += "<td>" + std::to_string(row.ops) + "</td><td>" + std::to_string(row.tensors) + "</td><td>" +
         std::to_string(row.shared) + "</td><td>" + std::to_string(row.hidden) + "</td><td>" +
         std::to_string(row.divergences) + "</td>";
    h += "<td><a href=\"" + html_escape(r.dir) + "/index.html\">rank " + std::to_string(r.rank) + "</a></td></tr>\n";
  }
  h += "</table>\n";
  for (const auto& r : ranks) {
    h += "<h2>rank " + std::to_string(r.rank) + "</h2>\n<ul>\n";
    for (const auto& line : r.summary) h += "<li>" + html_escape(line) + "</li>\n";
    h += "</ul>\n";
  }
  h += "<p><small>tierpack " + html_escape(TIERPACK_VERSION) + "</small></p></body></html>\n";
  return h;
}

nlohmann::json read_trace(const std::string& path) {
  const std::string text = read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw format_error(path + ": " + e.what());
  }
}

/// Every rank's events, pids moved into the rank's range and process names prefixed with the rank.
std::string merge_traces(const std::vector<RankReport>& ranks, const std::string& out_dir) {
  nlohmann::json events = nlohmann::json::array();
  for (const auto& r : ranks) {
    nlohmann::json t = read_trace((fs::path(out_dir) / r.dir / "trace.json").string());
    const auto& list = t.at("traceEvents");
    for (auto e : list) {
      if (e.contains("pid") && e["pid"].is_number_integer())
        e["pid"] = e["pid"].get<std::int64_t>() + static_cast<std::int64_t>(r.rank) * kRankPidStride;
      if (e.value("ph", "") == "M" && e.value("name", "") == "process_name" && e.contains("args") &&
          e["args"].contains("name") && e["args"]["name"].is_string())
        e["args"]["name"] = "rank " + std::to_string(r.rank) + ": " + e["args"]["name"].get<std::string>();
      if (e.value("ph", "") == "M" && e.value("name", "") == "process_sort_index" && e.contains("args") &&
          e["args"].contains("sort_index") && e["args"]["sort_index"].is_number_integer())
        e["args"]["sort_index"] =
            e["args"]["sort_index"].get<std::int64_t>() + static_cast<std::int64_t>(r.rank) * kRankPidStride;
      // Async ids (tensor lifetimes) must not collide across ranks.
      if (e.contains("id") && e["id"].is_string()) e["id"] = "r" + std::to_string(r.rank) + ":" + e["id"].get<std::string>();
      events.push_back(std::move(e));
    }
  }
  nlohmann::json out{{"traceEvents", std::move(events)},
                     {"displayTimeUnit", "ms"},
                     {"otherData", {{"generator", std::string("tierpack ") + TIERPACK_VERSION},
                                    {"ranks", ranks.size()},
                                    {"time_origin", "start of each rank's profiled iteration"}}}};
  return out.dump();
}

WrittenFile write_file(const std::string& path, const std::string& text, std::chrono::steady_clock::time_point t0) {
  detail::AtomicFileWriter w(path);
  w.write(text);
  w.commit();
  return {path, w.bytes(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

}  // namespace

std::vector<WrittenFile> write_rank_overview(const std::vector<RankReport>& ranks, const std::string& out_dir) {
  TIERPACK_EXPECTS(!ranks.empty(), "no ranks");
  std::vector<WrittenFile> files;
  auto t0 = std::chrono::steady_clock::now();
  files.push_back(write_file((fs::path(out_dir) / "index.html").string(), render_index(ranks), t0));
  t0 = std::chrono::steady_clock::now();
  files.push_back(write_file((fs::path(out_dir) / "trace.json").string(), merge_traces(ranks, out_dir), t0));
  return files;
}

}  // namespace tierpack::report
