// Writes the report's files (see report_writer.hpp).
#include "report/report_writer.hpp"

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <functional>
#include <system_error>

#include "core/error.hpp"
#include "core/file_envelope.hpp"
#include "report/html_report.hpp"
#include "report/memory_snapshot.hpp"
#include "report/perfetto_trace.hpp"
#include "report/summary.hpp"

namespace tierpack::report {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

ReportResult write_report(const ReportInputs& inputs, const ReportOptions& options, const std::string& out_dir) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw os_error("mkdir " + out_dir, ec.value());
  ReportResult result;
  auto t0 = std::chrono::steady_clock::now();
  const ReportModel model = build_model(inputs, options);
  result.model_seconds = seconds_since(t0);
  result.summary = model.summary;
  result.warnings = model.warnings;

  auto path_of = [&](const char* name) { return (std::filesystem::path(out_dir) / name).string(); };
  auto timed = [&](const char* name, const std::function<std::uint64_t(const std::string&)>& write) {
    const auto start = std::chrono::steady_clock::now();
    const std::string path = path_of(name);
    const auto bytes = write(path);
    result.files.push_back({path, bytes, seconds_since(start)});
  };
  timed("index.html", [&](const std::string& path) {
    const std::string html = render_html(model);
    write_file_atomic(path, html);
    return static_cast<std::uint64_t>(html.size());
  });
  timed("trace.json", [&](const std::string& path) { return write_trace(model, path); });
  // One layout for both encodings of the snapshot; its time is charged to the JSON file.
  MemorySnapshot snap;
  timed("memory_snapshot.json", [&](const std::string& path) {
    snap = build_snapshot(model);
    return write_snapshot_file(model, snap, path, false);
  });
  timed("memory_snapshot.pickle", [&](const std::string& path) { return write_snapshot_file(model, snap, path, true); });
  return result;
}

}  // namespace tierpack::report
