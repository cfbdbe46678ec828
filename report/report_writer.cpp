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

  auto emit = [&](const std::string& name, const std::function<std::string()>& render) {
    const auto start = std::chrono::steady_clock::now();
    const std::string text = render();
    const std::string path = (std::filesystem::path(out_dir) / name).string();
    write_file_atomic(path, text);
    result.files.push_back({path, text.size(), seconds_since(start)});
  };
  emit("index.html", [&] { return render_html(model); });
  emit("trace.json", [&] { return render_trace(model); });
  // One layout for both encodings of the snapshot; its time is charged to the JSON file.
  MemorySnapshot snap;
  emit("memory_snapshot.json", [&] {
    snap = build_snapshot(model);
    return snapshot_json(model, snap);
  });
  emit("memory_snapshot.pickle", [&] { return snapshot_pickle(model, snap); });
  return result;
}

}  // namespace tierpack::report
