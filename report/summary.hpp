// The report's shared statistics: everything index.html, trace.json and memory_snapshot.json show is
// computed here once from the inputs (Profile, optional Plan and RunStats), so the three outputs
// and the tests agree on every number.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/profile.hpp"
#include "core/tensor_class.hpp"
#include "report/report_inputs.hpp"
#include "report/savings.hpp"
#include "report/timeline.hpp"

namespace tierpack::report {

/// One memory owner of the profile: a CUDA device or the host (-1).
struct DeviceSummary {
  int device = -1;
  std::string name;              ///< "gpu0", "host"
  std::uint64_t tensors = 0;
  std::uint64_t peak_bytes = 0;  ///< equals Profile::peak_bytes(device)
  OpIndex peak_step = kBeforeIteration;
  double peak_t_ns = 0;
  std::array<std::uint64_t, kTensorClassCount> peak_by_class{};  ///< live bytes per class at the peak
  std::uint64_t idle_at_peak_bytes = 0;  ///< live at the peak and idle for > idle_threshold_ns around it
};

/// The series of a memory-by-tier chart: one stacked band per tier (the fast tier first).
struct MemoryChart {
  std::string title;
  std::string source;  ///< "profile", "plan", "run"
  StackedSeries series;               ///< downsampled for the web page
  StackedSeries full;                 ///< every point (trace.json counters)
  std::uint64_t peak_total = 0;       ///< before downsampling
  std::uint64_t fast_peak = 0;        ///< peak of the first band (the fast tier), before downsampling
};

struct TensorRow {
  TensorId id = 0;
  std::int64_t seq = -1;
  std::uint64_t bytes = 0;
  double begin_ns = 0, end_ns = 0;
  TensorClass cls = TensorClass::temporary;
  std::string alloc_op;
  std::string source;  ///< where the program allocated it ("model.py:63 forward"), "" unknown
  std::string module;  ///< the module it was allocated in (Profile::module_text), "" none or unknown
  std::uint32_t uses = 0;
  std::string where;  ///< device / tier name
  std::uint32_t flags = 0;
  double byte_seconds() const { return static_cast<double>(bytes) * (end_ns - begin_ns) * 1e-9; }
};

struct ClassRow {
  TensorClass cls = TensorClass::temporary;
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;            ///< sum of sizes
  std::uint64_t peak_live_bytes = 0;  ///< own peak over the iteration (all devices)
  double mean_lifetime_ns = 0;
  std::uint64_t uses = 0;
  std::uint64_t false_shared = 0;
  std::uint64_t hidden = 0;
};

struct PageRow {
  std::uint64_t address = 0;
  int numa_node = -1;
  std::vector<TensorId> tensors;
  std::uint32_t class_mask = 0;  ///< bit per TensorClass of the tensors on it
  std::uint32_t touch_windows = 0;
  std::uint32_t hidden_windows = 0;
  bool written = false;
};

struct PageStats {
  std::uint64_t notable_pages = 0;
  std::uint64_t false_shared_pages = 0;
  std::uint64_t hidden_pages = 0;
  std::uint64_t hidden_windows = 0;
  std::uint64_t false_shared_tensors = 0, false_shared_tensor_bytes = 0;
  std::uint64_t hidden_tensors = 0, hidden_tensor_bytes = 0;
  std::vector<PageRow> top_false_shared;  ///< most tensors first
  std::vector<PageRow> top_hidden;        ///< most hidden windows first
};

/// Lifetime chart rows: the largest tensors one per row, the rest as one band per class.
struct LifetimeChart {
  struct Row {
    TensorRow tensor;
    std::vector<double> use_ns;  ///< downsampled use times
  };
  std::vector<Row> rows;
  StackedSeries others;  ///< live bytes of the other tensors, per class
  std::array<std::uint64_t, kTensorClassCount> others_count{};
};

/// A migration drawn on the migrations chart (possibly several merged when there are many).
struct MigrationItem {
  double begin_ns = 0, end_ns = 0;
  std::uint64_t bytes = 0;
  std::uint32_t count = 1;
  std::uint32_t group = 0;
};
struct MigrationRow {
  std::string name;    ///< "predicted evictions", "measured prefetches", "measured stalls", ...
  std::string kind;    ///< "evict", "prefetch", "stall"
  std::string source;  ///< "plan", "run"
  std::uint64_t total_count = 0;
  std::uint64_t total_bytes = 0;
  double total_ns = 0;  ///< summed duration
  std::vector<MigrationItem> items;
};

struct ReportModel {
  const Profile* profile = nullptr;
  const Plan* plan = nullptr;
  const RunStats* run = nullptr;
  ReportInputs inputs;
  ReportOptions options;

  TimeAxis axis;
  std::vector<TensorClass> classes;  ///< per tensor
  std::string classifier;            ///< which classification coloured the report
  std::vector<DeviceSummary> devices;
  std::size_t main_device = 0;       ///< index into devices: the one budgets refer to
  double idle_threshold_ns = 0;

  std::string fast_tier_name;
  std::uint64_t budget_bytes = 0;    ///< the line drawn on memory charts (0: none)
  std::string budget_source;         ///< "plan", "run", "--budget"
  std::vector<MemoryChart> memory;   ///< profile first, then plan, then run
  LifetimeChart lifetimes;
  std::vector<MigrationRow> migrations;
  std::vector<TensorRow> top_tensors;
  std::array<ClassRow, kTensorClassCount> class_rows{};
  PageStats pages;
  Savings savings;
  std::vector<std::string> summary;  ///< plain-language sentences, every number from the inputs
  std::vector<std::string> warnings; ///< inputs that did not fit together (plan for another profile, ...)

  explicit ReportModel(const Profile& p) : profile(&p), axis(p) {}
};

/// Computes the model. Throws logic_error when inputs.profile is null.
ReportModel build_model(const ReportInputs& inputs, const ReportOptions& options);

/// Name of a device as the report shows it ("gpu0", "host").
std::string device_name(int device);
/// The tier a tensor's bytes are charged to: its recorded tier, else its device's tier when the
/// topology names exactly one, else "<device> (tier unknown)".
std::string tensor_tier_name(const Topology& topo, const TensorRecord& t);
std::string device_tier_name(const Topology& topo, int device);
/// Short, round threshold for "idle for > X": a 1-2-5 value near a tenth of the iteration.
double idle_threshold_for(double iteration_ns);

}  // namespace tierpack::report
