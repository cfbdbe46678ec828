// Plain-text tables for a Profile (see profile_summary.hpp).
#include "profiler/profile_summary.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/units.hpp"
#include "profiler/tensor_lifetime.hpp"

namespace tierpack {
namespace {

/// A small left-aligned table; the first row is the header.
class Table {
 public:
  void row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  std::string str(const std::string& indent = "  ") const {
    std::vector<std::size_t> width;
    for (const auto& r : rows_)
      for (std::size_t i = 0; i < r.size(); ++i) {
        if (width.size() <= i) width.push_back(0);
        width[i] = std::max(width[i], r[i].size());
      }
    std::string out;
    for (std::size_t k = 0; k < rows_.size(); ++k) {
      std::string line = indent;
      for (std::size_t i = 0; i < rows_[k].size(); ++i) {
        line += rows_[k][i];
        if (i + 1 < rows_[k].size()) line += std::string(width[i] - rows_[k][i].size() + 2, ' ');
      }
      out += line + "\n";
      if (k == 0) {
        std::size_t total = 0;
        for (auto w : width) total += w + 2;
        out += indent + std::string(total > 2 ? total - 2 : 0, '-') + "\n";
      }
    }
    return out;
  }
  bool empty() const { return rows_.size() <= 1; }

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string op_text(OpIndex op) {
  if (op == kBeforeIteration) return "before";
  if (op == kAfterIteration) return "after";
  return std::to_string(op);
}

std::string device_text(int device) { return device < 0 ? "host" : "cuda:" + std::to_string(device); }

std::string flags_text(const TensorRecord& t) {
  std::string s;
  auto add = [&s](const char* f) {
    if (!s.empty()) s += ',';
    s += f;
  };
  if (t.has(kTensorParameter)) add("param");
  if (t.has(kTensorGradient)) add("grad");
  if (t.has(kTensorOptimizerState)) add("optim");
  if (t.has(kTensorSavedForBackward)) add("saved");
  if (t.has(kTensorFalseShared)) add("false-shared");
  if (t.has(kTensorHiddenAccess)) add("HIDDEN");
  return s.empty() ? "-" : s;
}

/// Lifetime within the iteration, in ns: tensors alive at its start or end count from/to its edges.
std::uint64_t lifetime_ns(const TensorRecord& t, const Profile& p) {
  const std::uint64_t birth = t.birth_op == kBeforeIteration ? 0 : t.birth_ns;
  const std::uint64_t death = t.death_op == kAfterIteration ? p.iteration_ns : t.death_ns;
  return death > birth ? death - birth : 0;
}

std::string tensor_list(const std::vector<std::uint32_t>& ids, const Profile& p, const std::vector<TensorClass>& cls) {
  std::string s;
  for (std::size_t i = 0; i < ids.size() && i < 4; ++i) {
    const auto& t = p.tensors[ids[i]];
    if (!s.empty()) s += " ";
    s += '#';
    s += std::to_string(t.id) + "(" + std::string(to_string(cls[t.id])) + "," + format_bytes(t.bytes) + ")";
  }
  if (ids.size() > 4) s += " +" + std::to_string(ids.size() - 4);
  return s;
}

std::string hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

/// Tensor indices by bytes x lifetime, largest first (the top-tensors table of both forms).
std::vector<std::uint32_t> by_weight(const Profile& p) {
  std::vector<std::uint32_t> order(p.tensors.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  auto weight = [&](std::uint32_t i) {
    return static_cast<long double>(p.tensors[i].bytes) * static_cast<long double>(lifetime_ns(p.tensors[i], p));
  };
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return weight(a) > weight(b); });
  return order;
}

/// Tensors, bytes and pages touched per class (one definition for the text and the JSON summary).
struct ClassTotals {
  std::array<std::uint64_t, kTensorClassCount> count{}, bytes{}, touched{};
};

ClassTotals class_totals(const Profile& p, const std::vector<TensorClass>& cls) {
  ClassTotals t;
  for (std::size_t i = 0; i < p.tensors.size(); ++i) {
    const auto c = static_cast<std::size_t>(cls[i]);
    ++t.count[c];
    t.bytes[c] += p.tensors[i].bytes;
    t.touched[c] += p.tensors[i].pages_touched;
  }
  return t;
}

/// Where the program allocated `t`: {file, line, function, module, text}, or null when unknown;
/// `module` is Profile::module_text ("" outside any module).
nlohmann::json source_json(const Profile& p, const TensorRecord& t) {
  const SourceLocation* s = p.source_of(t);
  if (!s) return nullptr;
  return {{"file", s->file}, {"line", s->line}, {"function", s->function}, {"module", p.module_text(t)},
          {"text", s->short_text()}};
}

std::string dash_if_empty(std::string s) { return s.empty() ? "-" : s; }

}  // namespace

nlohmann::json profile_summary_json(const Profile& p, const SummaryOptions& opt) {
  using nlohmann::json;
  const auto cls = estimate_classes(p.tensors, p.ops);
  const auto& m = p.meta;
  json peaks = json::object();
  std::map<int, bool> devices;
  for (const auto& t : p.tensors) devices[t.device] = true;
  for (const auto& [dev, unused] : devices) peaks[device_text(dev)] = p.peak_bytes(dev);
  const auto [count, bytes, touched] = class_totals(p, cls);
  json classes = json::array();
  for (std::size_t c = 0; c < kTensorClassCount; ++c)
    classes.push_back({{"class", to_string(static_cast<TensorClass>(c))}, {"tensors", count[c]}, {"bytes", bytes[c]},
                       {"pages_touched", touched[c]}});
  json top = json::array();
  const auto order = by_weight(p);
  for (std::size_t k = 0; k < order.size() && k < opt.top_tensors; ++k) {
    const auto& r = p.tensors[order[k]];
    top.push_back({{"id", r.id}, {"seq", r.seq}, {"device", device_text(r.device)}, {"bytes", r.bytes},
                   {"lifetime_ns", lifetime_ns(r, p)}, {"birth_op", r.birth_op}, {"death_op", r.death_op},
                   {"class", to_string(cls[r.id])}, {"alloc_op", r.alloc_op}, {"uses", r.uses.size()},
                   {"pages", r.pages}, {"pages_touched", r.pages_touched}, {"pages_written", r.pages_written},
                   {"flags", flags_text(r)}, {"source", source_json(p, r)}});
  }
  std::size_t shared = 0, false_shared = 0, hidden = 0, hidden_tensors = 0;
  for (const auto& pg : p.pages) {
    shared += pg.tensors.size() > 1 ? 1 : 0;
    false_shared += pg.false_shared ? 1 : 0;
    hidden += pg.hidden_windows > 0 ? 1 : 0;
  }
  for (const auto& t : p.tensors) hidden_tensors += t.has(kTensorHiddenAccess) ? 1 : 0;
  json iterations = json::array();
  for (const auto& it : p.iterations)
    iterations.push_back({{"index", it.index}, {"duration_ns", it.duration_ns}, {"allocations", it.allocations},
                          {"signature", hex(it.signature)}, {"matches_profiled", it.matches_profiled}});
  json divergences = json::array();
  for (const auto& d : p.divergences) divergences.push_back({{"iteration", d.iteration}, {"seq", d.seq}, {"reason", d.reason}});
  return {{"id", m.id.empty() ? json(nullptr) : json(m.id)},
          {"command", m.command},
          {"framework", m.framework},
          {"tool_version", m.tool_version},
          {"page_tracer", m.page_tracer},
          {"host_page_size", m.host_page_size},
          {"profiled_iteration", m.profiled_iteration},
          {"iterations_observed", m.iterations_observed},
          {"iteration_source", m.iteration_source},
          {"iteration_ns", p.iteration_ns},
          {"ops", p.ops.size()},
          {"tensors", p.tensors.size()},
          {"peak_bytes", peaks},
          {"classes", classes},
          {"top_tensors", top},
          {"pages", {{"shared", shared}, {"false_shared", false_shared}, {"hidden_access", hidden}}},
          {"hidden_access_tensors", hidden_tensors},
          {"iterations", iterations},
          {"divergences", divergences}};
}

std::string format_profile_summary(const Profile& p, const SummaryOptions& opt) {
  std::ostringstream out;
  const auto cls = estimate_classes(p.tensors, p.ops);
  const auto& m = p.meta;
  out << "profile: " << (m.command.empty() ? "(no command)" : m.command) << "\n";
  out << "  identity " << (m.id.empty() ? "unknown (written before profiles carried one)" : m.id) << "\n";
  out << "  framework " << (m.framework.empty() ? "?" : m.framework) << ", tierpack " << m.tool_version
      << ", page tracer " << (m.page_tracer.empty() ? "none" : m.page_tracer) << ", page size " << m.host_page_size << "\n";
  out << "  iteration " << m.profiled_iteration << " of " << m.iterations_observed << " observed (boundaries: "
      << (m.iteration_source.empty() ? "?" : m.iteration_source) << "), " << format_duration_ns(double(p.iteration_ns))
      << ", " << p.ops.size() << " ops, " << p.tensors.size() << " tensors\n";
  std::map<int, bool> devices;
  for (const auto& t : p.tensors) devices[t.device] = true;
  for (const auto& [dev, unused] : devices)
    out << "  peak live bytes on " << device_text(dev) << ": " << format_bytes(p.peak_bytes(dev)) << "\n";

  // ---- classes ----
  {
    const auto [count, bytes, touched] = class_totals(p, cls);
    Table t;
    t.row({"class", "tensors", "bytes", "pages touched"});
    for (std::size_t c = 0; c < kTensorClassCount; ++c)
      t.row({std::string(to_string(static_cast<TensorClass>(c))), std::to_string(count[c]), format_bytes(bytes[c]),
             std::to_string(touched[c])});
    out << "\nlifetime classes (first cut; the placer refines them):\n" << t.str();
  }

  // ---- top tensors by bytes x lifetime ----
  {
    const auto order = by_weight(p);
    Table t;
    t.row({"id", "seq", "device", "bytes", "lifetime", "ops", "class", "allocated by", "source", "module", "uses",
           "pages", "touched", "written", "flags"});
    for (std::size_t k = 0; k < order.size() && k < opt.top_tensors; ++k) {
      const auto& r = p.tensors[order[k]];
      t.row({std::to_string(r.id), std::to_string(r.seq), device_text(r.device), format_bytes(r.bytes),
             format_duration_ns(double(lifetime_ns(r, p))), op_text(r.birth_op) + ".." + op_text(r.death_op),
             std::string(to_string(cls[r.id])), dash_if_empty(r.alloc_op), dash_if_empty(p.source_text(r)),
             dash_if_empty(p.module_text(r)), std::to_string(r.uses.size()),
             std::to_string(r.pages), std::to_string(r.pages_touched), std::to_string(r.pages_written), flags_text(r)});
    }
    out << "\ntop tensors by bytes x lifetime:\n" << (t.empty() ? "  (no tensors)\n" : t.str());
  }

  // ---- pages ----
  {
    std::size_t shared = 0, false_shared = 0, hidden = 0;
    Table fs, hid;
    fs.row({"page", "node", "touch windows", "tensors (class, bytes)"});
    hid.row({"page", "hidden windows", "touch windows", "written", "tensors (class, bytes)"});
    for (const auto& pg : p.pages) {
      if (pg.tensors.size() > 1) ++shared;
      if (pg.false_shared && ++false_shared <= opt.max_pages)
        fs.row({hex(pg.address), std::to_string(pg.numa_node), std::to_string(pg.touch_windows),
                tensor_list(pg.tensors, p, cls)});
      if (pg.hidden_windows > 0 && ++hidden <= opt.max_pages)
        hid.row({hex(pg.address), std::to_string(pg.hidden_windows), std::to_string(pg.touch_windows),
                 pg.written ? "yes" : "no", tensor_list(pg.tensors, p, cls)});
    }
    out << "\npage false sharing: " << false_shared << " page(s) hold tensors of different lifetime classes ("
        << shared << " shared by several tensors)\n";
    if (!fs.empty()) out << fs.str();
    if (false_shared > opt.max_pages) out << "  ... " << false_shared - opt.max_pages << " more\n";
    std::size_t hidden_tensors = 0;
    for (const auto& t : p.tensors) hidden_tensors += t.has(kTensorHiddenAccess) ? 1 : 0;
    out << "\nhidden accesses: " << hidden << " page(s) touched in windows where no reported op used them ("
        << hidden_tensors << " tensor(s) flagged: not safe to move early)\n";
    if (!hid.empty()) out << hid.str();
    if (hidden > opt.max_pages) out << "  ... " << hidden - opt.max_pages << " more\n";
  }

  // ---- iterations ----
  {
    std::size_t mismatched = 0;
    for (const auto& it : p.iterations) mismatched += it.matches_profiled ? 0 : 1;
    out << "\niterations: " << p.iterations.size() << " observed, " << mismatched
        << " differ from the profiled one (warm-up iterations usually do)\n";
    Table t;
    t.row({"iteration", "time", "allocations", "signature", "matches"});
    const std::size_t n = p.iterations.size();
    for (std::size_t i = 0; i < n; ++i) {
      if (n > 12 && i >= 6 && i + 6 < n) {
        if (i == 6) t.row({"...", "", "", "", ""});
        continue;
      }
      const auto& it = p.iterations[i];
      t.row({std::to_string(it.index) + (it.index == m.profiled_iteration ? " (profiled)" : ""),
             format_duration_ns(double(it.duration_ns)), std::to_string(it.allocations), hex(it.signature),
             it.matches_profiled ? "yes" : "no"});
    }
    if (n > 0) out << t.str();
    out << "\ndivergence: ";
    if (p.divergences.empty()) {
      out << "none (every iteration after the profiled one allocated the same sequence)\n";
    } else {
      out << p.divergences.size() << " iteration(s) diverged from the profiled one (dynamic shapes?): "
          << "placement falls back to safe defaults for them\n";
      Table d;
      d.row({"iteration", "seq", "reason"});
      for (std::size_t i = 0; i < p.divergences.size() && i < opt.max_pages; ++i)
        d.row({std::to_string(p.divergences[i].iteration), std::to_string(p.divergences[i].seq), p.divergences[i].reason});
      out << d.str();
    }
  }
  return out.str();
}

}  // namespace tierpack
