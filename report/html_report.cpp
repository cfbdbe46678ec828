// index.html (see html_report.hpp). Tables are written here; charts are drawn in the browser by
// assets/report.js from the JSON this file embeds.
#include "report/html_report.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/units.hpp"
#include "core/version.hpp"
#include "report/assets.hpp"
#include "report/detail/text.hpp"
#include "report/page_map.hpp"

namespace tierpack::report {
namespace {

using detail::bytes_short;
using detail::duration_short;
using tierpack::html_escape;
using detail::percent;
using detail::with_commas;

constexpr std::string_view kCellAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr const char* kClassColors[] = {"#f28e2c", "#4e79a7", "#59a14f", "#af7aa1"};

std::int64_t ns(double v) { return static_cast<std::int64_t>(std::llround(v)); }

// ---- table helpers -------------------------------------------------------------------------------
struct Table {
  std::ostringstream out;
  explicit Table(const std::string& id, std::initializer_list<std::pair<const char*, bool>> columns) {
    out << "<table id=\"" << id << "\"><thead><tr>";
    for (const auto& [name, numeric] : columns) out << (numeric ? "<th class=\"num\">" : "<th>") << name << "</th>";
    out << "</tr></thead><tbody>\n";
  }
  Table& row() { out << "<tr>"; return *this; }
  Table& end_row() { out << "</tr>\n"; return *this; }
  Table& text(const std::string& s) { out << "<td>" << html_escape(s) << "</td>"; return *this; }
  Table& html(const std::string& s) { out << "<td>" << s << "</td>"; return *this; }
  Table& code(const std::string& s) { out << "<td class=\"code\">" << html_escape(s) << "</td>"; return *this; }
  Table& num(const std::string& shown, double value) {
    out << "<td class=\"num\" data-value=\"" << detail::json_number(value, 3) << "\">" << html_escape(shown) << "</td>";
    return *this;
  }
  Table& bytes(std::uint64_t b) {
    out << "<td class=\"num\" data-value=\"" << b << "\">" << bytes_short(b) << "</td>";
    return *this;
  }
  Table& count(std::uint64_t n) {
    out << "<td class=\"num\" data-value=\"" << n << "\">" << with_commas(n) << "</td>";
    return *this;
  }
  Table& time(double t) { return num(duration_short(t), t); }
  std::string done() {
    out << "</tbody></table>\n";
    return out.str();
  }
};

std::string class_cell(TensorClass c) {
  return "<span class=\"cls\" style=\"background:" + std::string(kClassColors[static_cast<int>(c)]) + "\"></span>" +
         std::string(to_string(c));
}

std::string flags_text(std::uint32_t f) {
  std::string s;
  auto add = [&](std::uint32_t bit, const char* name) {
    if (f & bit) s += (s.empty() ? "" : ", ") + std::string(name);
  };
  add(kTensorParameter, "parameter");
  add(kTensorGradient, "gradient");
  add(kTensorOptimizerState, "optimizer state");
  add(kTensorSavedForBackward, "saved for backward");
  add(kTensorFalseShared, "false-shared");
  add(kTensorHiddenAccess, "hidden access");
  return s;
}

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string classes_of(std::uint32_t mask) {
  std::string s;
  for (int c = 0; c < kTensorClassCount; ++c)
    if (mask & (1u << c)) s += (s.empty() ? "" : ", ") + std::string(to_string(static_cast<TensorClass>(c)));
  return s;
}

std::string tensor_list(const std::vector<TensorId>& ids, std::size_t max = 8) {
  std::string s;
  for (std::size_t i = 0; i < ids.size() && i < max; ++i) s += (i ? ", #" : "#") + std::to_string(ids[i]);
  if (ids.size() > max) s += " (+" + std::to_string(ids.size() - max) + ")";
  return s;
}

std::string metric(const std::string& name, const std::string& shown, double value) {
  return "<span class=\"metric\" data-metric=\"" + html_escape(name) + "\" data-value=\"" + detail::json_number(value, 3) +
         "\">" + html_escape(shown) + "</span>";
}

// ---- sections ------------------------------------------------------------------------------------
std::string section_summary(const ReportModel& m) {
  std::ostringstream o;
  o << "<section id=\"summary\"><h2>Summary</h2>\n<ul>\n";
  for (const auto& s : m.summary) o << "<li>" << html_escape(s) << "</li>\n";
  o << "</ul>\n";
  for (const auto& w : m.warnings) o << "<p class=\"warning\">" << html_escape(w) << "</p>\n";
  o << "<p class=\"note\">Key figures: ";
  bool first = true;
  for (const auto& d : m.devices) {
    o << (first ? "" : " &middot; ") << metric("peak_bytes." + d.name, d.name + " peak " + bytes_short(d.peak_bytes), static_cast<double>(d.peak_bytes))
      << ", " << metric("idle_at_peak_bytes." + d.name, bytes_short(d.idle_at_peak_bytes) + " idle", static_cast<double>(d.idle_at_peak_bytes));
    first = false;
  }
  o << " &middot; " << metric("iteration_ns", "iteration " + duration_short(m.axis.end_ns()), m.axis.end_ns()) << " &middot; "
    << metric("idle_threshold_ns", "idle means unused for > " + duration_short(m.idle_threshold_ns), m.idle_threshold_ns)
    << " &middot; " << metric("ops", with_commas(m.profile->ops.size()) + " ops", static_cast<double>(m.profile->ops.size()))
    << " &middot; " << metric("tensors", with_commas(m.profile->tensors.size()) + " tensors", static_cast<double>(m.profile->tensors.size()))
    << "</p>\n";
  o << "<p class=\"render-error\" id=\"render-error\" hidden></p>\n</section>\n";
  return o.str();
}

std::string section_memory(const ReportModel& m) {
  std::ostringstream o;
  o << "<section id=\"memory\"><h2>Memory by tier over the iteration</h2>\n"
    << "<p class=\"note\">Live tensor bytes per tier, stacked, the fast tier at the bottom; one step per op (each op step runs "
       "from one op's start to the next op's start). ";
  if (m.plan)
    o << "The planned chart follows the placer's accounting: per op, the bytes of the plan's page groups held on the fast "
         "tier (a moving group counts there until its eviction is done, and from its prefetch's start), the rest of the "
         "groups' bytes on the slow tier. ";
  if (m.run) o << "The measured chart shows the run's resident-bytes samples. ";
  if (m.budget_bytes) o << "Dashed line: the fast tier's budget (" << html_escape(m.budget_source) << ").";
  else o << "No budget given (pass a plan, run statistics or --budget to draw one).";
  o << "</p>\n<div id=\"memory-charts\"></div><div class=\"legend\" id=\"memory-legend\"></div>\n";
  Table t("memory-table", {{"chart", false}, {"peak (all tiers)", true}, {"fast tier peak", true}, {"budget", true},
                           {"fast peak the plan predicts", true}});
  for (const auto& c : m.memory) {
    t.row().text(c.title).bytes(c.peak_total).bytes(c.fast_peak);
    if (m.budget_bytes) t.bytes(m.budget_bytes); else t.text("-");
    if (c.source == "plan") t.bytes(m.plan->prediction.fast_peak_bytes); else t.text("-");
    t.end_row();
  }
  o << t.done() << "</section>\n";
  return o.str();
}

std::string section_lifetimes(const ReportModel& m) {
  std::ostringstream o;
  std::uint64_t others = 0;
  for (auto c : m.lifetimes.others_count) others += c;
  o << "<section id=\"lifetimes\"><h2>Tensor lifetimes</h2>\n<p class=\"note\">The " << m.lifetimes.rows.size()
    << " largest tensors, one per row (largest first), coloured by lifetime class, with a tick at each op that uses them. "
    << "The other " << with_commas(others) << " tensors are drawn as one band per class: their live bytes over time, "
    << "scaled to the band's own peak. Classes: " << html_escape(m.classifier) << ".</p>\n"
    << "<div class=\"plot\"><canvas id=\"lifetimes-canvas\" class=\"plot-canvas\" data-plot=\"lifetimes\"></canvas></div>"
    << "<div class=\"legend\" id=\"lifetimes-legend\"></div>\n</section>\n";
  return o.str();
}

std::string section_pages(const std::vector<DevicePageMap>& maps, const GroupMap* groups) {
  std::ostringstream o;
  o << "<section id=\"page-map\"><h2>Page map</h2>\n<p class=\"note\">Pages that held tensor bytes during the iteration, in "
       "address order (unused address ranges elided), coloured by the lifetime classes of the tensors on them; brown cells "
       "held tensors of more than one class at some time. Red outlines mark pages the profile found false-shared (tensors "
       "of different classes on one page at once), black dots pages with hidden accesses.";
  if (groups) o << " Below: the plan's page groups, coloured by class (black bar: pinned, never moved).";
  o << "</p>\n<div id=\"pagemap-charts\"></div><div class=\"legend\" id=\"pagemap-legend\"></div>\n";
  Table t("pagemap-table", {{"device", false}, {"page size", true}, {"pages used", true}, {"temporary", true},
                            {"activation", true}, {"iteration", true}, {"persistent", true}, {"mixed", true},
                            {"false-shared", true}, {"hidden", true}, {"tensors without address", true}});
  for (const auto& pm : maps) {
    t.row().text(pm.name).bytes(pm.page_size).count(pm.pages);
    for (auto c : pm.single_class_pages) t.count(c);
    t.count(pm.mixed_pages).count(pm.false_shared_pages).count(pm.hidden_pages).count(pm.tensors_without_address).end_row();
  }
  o << t.done();
  if (groups) {
    Table g("groups-table", {{"class", false}, {"groups", true}, {"bytes", true}});
    for (int c = 0; c < kTensorClassCount; ++c)
      g.row().html(class_cell(static_cast<TensorClass>(c))).count(groups->groups_by_class[static_cast<std::size_t>(c)])
          .bytes(groups->bytes_by_class[static_cast<std::size_t>(c)]).end_row();
    o << g.done() << "<p class=\"note\">" << with_commas(groups->pinned) << " of " << with_commas(groups->groups)
      << " groups are pinned.</p>\n";
  }
  o << "</section>\n";
  return o.str();
}

std::string section_migrations(const ReportModel& m) {
  std::ostringstream o;
  o << "<section id=\"migrations\"><h2>Migrations</h2>\n";
  if (m.migrations.empty()) {
    o << "<p class=\"empty\">No plan and no run statistics given: nothing moves in a profiled run. "
         "Pass --plan plan.json (from tierpack plan) and --run-stats stats.json to see predicted and measured moves.</p>\n";
  } else {
    o << "<p class=\"note\">Evictions (fast to slow), prefetches (slow to fast) and stalls over the iteration; "
         "predicted ones from the plan's schedule (times on the simulator's timeline, which runs longer than the profiled "
         "iteration when ops wait or read the slow tier in place), measured ones from the run statistics. Overlapping moves "
         "are drawn in lanes.</p>\n<div class=\"plot\"><canvas id=\"migrations-canvas\" class=\"plot-canvas\" data-plot=\"migrations\">"
         "</canvas></div><div class=\"legend\" id=\"migrations-legend\"></div>\n";
    Table t("migrations-table", {{"what", false}, {"source", false}, {"count", true}, {"bytes", true}, {"total time", true}});
    for (const auto& r : m.migrations) t.row().text(r.name).text(r.source).count(r.total_count).bytes(r.total_bytes).time(r.total_ns).end_row();
    o << t.done();
    if (m.plan) {
      o << "<p class=\"note\">The plan predicts " << duration_short(m.plan->prediction.stall_ns)
        << " of stalls per iteration in total (its schedule does not place them on the timeline).</p>\n";
    }
  }
  o << "</section>\n";
  return o.str();
}

std::string section_top_tensors(const ReportModel& m) {
  std::ostringstream o;
  o << "<section id=\"top-tensors\"><h2>Top tensors by bytes &times; lifetime</h2>\n"
    << "<p class=\"note\">The tensors that hold the most memory for the longest: size times live time.</p>\n";
  Table t("top-tensors-table", {{"tensor", false}, {"seq", true}, {"bytes", true}, {"lifetime", true}, {"GiB&middot;s", true},
                                {"class", false}, {"allocating op", false}, {"source", false}, {"module", false},
                                {"uses", true}, {"where", false}, {"flags", false}});
  for (const auto& r : m.top_tensors) {
    char gs[32];
    std::snprintf(gs, sizeof gs, "%.4g", r.byte_seconds() / (1024.0 * 1024 * 1024));
    t.row()
        .text(std::string("#").append(std::to_string(r.id)))
        .num(std::to_string(r.seq), static_cast<double>(r.seq))
        .bytes(r.bytes)
        .time(r.end_ns - r.begin_ns)
        .num(gs, r.byte_seconds())
        .html(class_cell(r.cls))
        .code(r.alloc_op.empty() ? "(before the iteration)" : r.alloc_op)
        .code(r.source.empty() ? "-" : r.source)
        .code(r.module.empty() ? "-" : r.module)
        .count(r.uses)
        .text(r.where)
        .text(flags_text(r.flags))
        .end_row();
  }
  o << t.done() << "</section>\n";
  return o.str();
}

std::string section_classes(const ReportModel& m) {
  std::ostringstream o;
  const auto& main = m.devices.empty() ? DeviceSummary{} : m.devices[m.main_device];
  o << "<section id=\"classes\"><h2>Lifetime classes</h2>\n<p class=\"note\">" << html_escape(m.classifier)
    << ". At-peak bytes refer to " << html_escape(main.name) << ".</p>\n";
  Table t("classes-table", {{"class", false}, {"tensors", true}, {"bytes allocated", true}, {"own peak", true},
                            {"at the peak", true}, {"mean lifetime", true}, {"uses", true}, {"false-shared", true},
                            {"hidden access", true}});
  for (const auto& r : m.class_rows)
    t.row().html(class_cell(r.cls)).count(r.count).bytes(r.bytes).bytes(r.peak_live_bytes)
        .bytes(main.peak_by_class[static_cast<std::size_t>(r.cls)]).time(r.mean_lifetime_ns).count(r.uses)
        .count(r.false_shared).count(r.hidden).end_row();
  o << t.done() << "</section>\n";
  return o.str();
}

std::string page_table(const std::string& id, const std::vector<PageRow>& rows) {
  Table t(id, {{"page", false}, {"NUMA node", true}, {"tensors", false}, {"classes", false}, {"touch windows", true},
               {"hidden windows", true}, {"written", false}});
  for (const auto& r : rows)
    t.row().code(hex(r.address)).num(r.numa_node < 0 ? "-" : std::to_string(r.numa_node), r.numa_node)
        .text(tensor_list(r.tensors)).text(classes_of(r.class_mask)).count(r.touch_windows).count(r.hidden_windows)
        .text(r.written ? "yes" : "no").end_row();
  return t.done();
}

std::string section_false_sharing(const ReportModel& m) {
  const auto& s = m.pages;
  std::ostringstream o;
  o << "<section id=\"false-sharing\"><h2>False sharing</h2>\n<p class=\"note\">"
    << metric("false_shared_pages", with_commas(s.false_shared_pages) + " pages", static_cast<double>(s.false_shared_pages))
    << " hold tensors of different lifetime classes at the same time; "
    << metric("false_shared_tensors", with_commas(s.false_shared_tensors) + " tensors", static_cast<double>(s.false_shared_tensors))
    << " (" << bytes_short(s.false_shared_tensor_bytes)
    << ") are flagged. Moving such a page drags a tensor that is still in use along with one that is not; page-aware packing "
       "keeps classes apart.</p>\n";
  if (s.top_false_shared.empty()) o << "<p class=\"empty\">No false-shared pages in the profile.</p>\n";
  else o << page_table("false-sharing-table", s.top_false_shared);
  o << "</section>\n";
  return o.str();
}

std::string section_hidden(const ReportModel& m) {
  const auto& s = m.pages;
  std::ostringstream o;
  o << "<section id=\"hidden-accesses\"><h2>Hidden accesses</h2>\n<p class=\"note\">"
    << metric("hidden_pages", with_commas(s.hidden_pages) + " pages", static_cast<double>(s.hidden_pages)) << " were touched in "
    << with_commas(s.hidden_windows) << " op windows in which no op the framework reported used a tensor on them; "
    << metric("hidden_tensors", with_commas(s.hidden_tensors) + " tensors", static_cast<double>(s.hidden_tensors)) << " ("
    << bytes_short(s.hidden_tensor_bytes)
    << ") are flagged. The planner keeps them where they are (moving them early is unsafe).</p>\n";
  if (s.top_hidden.empty()) o << "<p class=\"empty\">No hidden accesses in the profile.</p>\n";
  else o << page_table("hidden-accesses-table", s.top_hidden);
  o << "</section>\n";
  return o.str();
}

std::string section_divergence(const ReportModel& m) {
  const Profile& p = *m.profile;
  std::ostringstream o;
  std::size_t diverged = 0;
  for (const auto& it : p.iterations) diverged += it.matches_profiled ? 0 : 1;
  o << "<section id=\"divergence\"><h2>Iteration divergence</h2>\n<p class=\"note\">"
    << metric("diverged_iterations", with_commas(diverged), static_cast<double>(diverged)) << " of "
    << with_commas(p.iterations.size())
    << " observed iterations allocate differently from the profiled one (allocation-sequence signature: size and "
       "allocating op of every allocation). Where they differ, a plan falls back to the default placement.</p>\n";
  if (!p.iterations.empty()) {
    Table t("iterations-table", {{"iteration", true}, {"duration", true}, {"allocations", true}, {"signature", false}, {"matches", false}});
    const std::size_t cap = std::max<std::size_t>(m.options.table_rows * 2, 10);
    for (std::size_t i = 0; i < p.iterations.size() && i < cap; ++i) {
      const auto& it = p.iterations[i];
      t.row().count(static_cast<std::uint64_t>(std::max(it.index, 0))).time(static_cast<double>(it.duration_ns)).count(it.allocations)
          .code(hex(it.signature)).text(it.matches_profiled ? "yes" : "no").end_row();
    }
    o << t.done();
    if (p.iterations.size() > cap) o << "<p class=\"note\">(" << with_commas(p.iterations.size() - cap) << " more iterations not listed)</p>\n";
  }
  if (p.divergences.empty()) {
    o << "<p class=\"empty\">No divergence recorded.</p>\n";
  } else {
    Table t("divergences-table", {{"iteration", true}, {"first differing seq", true}, {"reason", false}});
    for (std::size_t i = 0; i < p.divergences.size() && i < m.options.table_rows; ++i) {
      const auto& d = p.divergences[i];
      t.row().count(static_cast<std::uint64_t>(std::max(d.iteration, 0))).num(std::to_string(d.seq), static_cast<double>(d.seq))
          .text(d.reason).end_row();
    }
    o << t.done();
  }
  o << "</section>\n";
  return o.str();
}

std::string section_savings(const ReportModel& m) {
  const auto& s = m.savings;
  std::ostringstream o;
  o << "<section id=\"savings\"><h2>What tierpack would save</h2>\n";
  if (s.rows.empty()) {
    o << "<p class=\"empty\">No tensors: nothing to save.</p></section>\n";
    return o.str();
  }
  o << "<p class=\"note\">Fast-tier budgets for " << html_escape(device_name(s.device)) << " (profiled peak "
    << bytes_short(s.peak_bytes) << ", iteration " << duration_short(s.iteration_ns) << "). Tier model: "
    << html_escape(s.model) << " (" << html_escape(s.model_source) << ")";
  if (s.bandwidth > 0) o << ", link " << detail::json_number(s.bandwidth / 1e9, 1) << " GB/s each way";
  o << ". " << html_escape(s.method) << "</p>\n";
  // Note [Lower-bound predictions] in placer/prediction_bound.hpp.
  if (!s.lower_bound.empty()) {
    o << "<p class=\"note lower-bound\"><strong>Predicted step times are lower bounds:</strong></p>\n<ul class=\"lower-bound\">\n";
    for (const auto& why : s.lower_bound) o << "<li>" << html_escape(why) << "</li>\n";
    o << "</ul>\n";
  }
  Table t("savings-table", {{"budget", false}, {"source", false}, {"fast memory", true}, {"fast-tier peak", true},
                            {"saves", true}, {"fits", false}, {"out per iteration", true}, {"back per iteration", true},
                            {"moves", true}, {"copy time", true}, {"step time", true}, {"vs profiled", true},
                            {"stalls", true}, {"notes", false}});
  for (const auto& r : s.rows) {
    t.row().text(r.label).text(r.source == "planner" ? "planner prediction" : r.source == "plan" ? "given plan's prediction" : "measured");
    if (r.budget_bytes) t.bytes(r.budget_bytes); else t.text("-");
    t.bytes(r.fast_peak_bytes).bytes(r.saved_bytes).text(r.fits ? "yes" : "no");
    t.bytes(r.bytes_to_slow)
        .bytes(r.bytes_to_fast)
        .count(r.moves)
        .time(r.copy_ns)
        .time(r.step_ns)
        .num(std::string(r.step_ns > s.iteration_ns ? "+" : "")
                 .append(percent(r.step_ns - s.iteration_ns, s.iteration_ns)),
             r.step_ns / std::max(s.iteration_ns, 1.0))
        ;
    // Note [Run counters]: a run that does not wait has late prefetches, not a stall time of 0.
    if (r.stall_measured) t.time(r.stall_ns);
    else t.text("not measured (" + detail::json_number(r.late_prefetches, 1) + " late prefetches/iteration)");
    t.text(r.note);
    t.end_row();
  }
  o << t.done() << "</section>\n";
  return o.str();
}

// Note [Block recompute] and docs/run.md: what the GPU tier did with each saved storage, largest first.
std::string section_gpu_choices(const ReportModel& m) {
  std::ostringstream o;
  o << "<section id=\"gpu-choices\"><h2>GPU tier: keep, offload or recompute</h2>\n";
  if (m.inputs.gpu_choices.empty()) {
    o << "<p class=\"empty\">No GPU tier plan among the inputs (the storage mechanism writes one beside "
         "<code>tierpack run --stats</code> once it plans: &lt;stats&gt;.gpu&lt;N&gt;.saved.json).</p>\n</section>\n";
    return o.str();
  }
  for (const auto& g : m.inputs.gpu_choices) {
    std::size_t n[4] = {0, 0, 0, 0};
    std::uint64_t b[4] = {0, 0, 0, 0};
    for (const SavedChoice& c : g.rows) n[static_cast<int>(c.kind)] += 1, b[static_cast<int>(c.kind)] += c.bytes;
    o << "<p class=\"note\">" << html_escape(g.device) << ", from " << html_escape(g.path)
      << ": the plan the run followed, live bytes under " << bytes_short(g.limit_bytes) << ", predicted step "
      << detail::json_number(g.predicted_ms, 1) << " ms (recorded " << detail::json_number(g.recorded_ms, 1) << " ms). "
      << with_commas(n[0]) << " storages kept (" << bytes_short(b[0]) << "), " << with_commas(n[1]) << " offloaded ("
      << bytes_short(b[1]) << "), " << with_commas(n[2]) << " made again by their recipe (" << bytes_short(b[2]) << "), "
      << with_commas(n[3]) << " made again by running their block (" << bytes_short(b[3])
      << "). Calls are those of the recorded iteration (packs in forward, then unpacks in backward).</p>\n";
    std::vector<SavedChoice> rows = g.rows;
    std::stable_sort(rows.begin(), rows.end(), [](const SavedChoice& a, const SavedChoice& c) { return a.bytes > c.bytes; });
    const std::size_t cap = std::max<std::size_t>(m.options.table_rows * 2, 10);
    Table t("gpu-choices-table", {{"storage", true}, {"bytes", true}, {"choice", false}, {"let go at", true},
                                  {"back / made at", true}, {"recipe and measurement", false}});
    for (std::size_t i = 0; i < rows.size() && i < cap; ++i) {
      const SavedChoice& c = rows[i];
      t.row().count(static_cast<std::uint64_t>(c.storage)).bytes(c.bytes).text(choice_name(c.kind))
          .num(c.released_at < 0 ? "-" : std::to_string(c.released_at), c.released_at)
          .num(c.back_at < 0 ? "-" : std::to_string(c.back_at), c.back_at).text(recipe_text(c)).end_row();
    }
    o << t.done();
    if (rows.size() > cap)
      o << "<p class=\"note\">(" << with_commas(rows.size() - cap) << " smaller storages not listed: "
        << "<code>tierpack gpu-replay " << html_escape(g.path) << " --storages --json</code> lists all)</p>\n";
  }
  o << "</section>\n";
  return o.str();
}

std::string section_files(const ReportModel&) {
  return "<section id=\"files\"><h2>Other files of this report</h2>\n<ul>\n"
         "<li><a href=\"trace.json\">trace.json</a>: the iteration in the Chrome/Perfetto trace event format (ops per thread, "
         "tensor lifetimes as async slices, resident bytes per tier as counters, migrations on their own tracks). Open it in "
         "ui.perfetto.dev or chrome://tracing.</li>\n"
         "<li><a href=\"memory_snapshot.json\">memory_snapshot.json</a>: the tensors as a PyTorch memory snapshot (segments and "
         "device_traces, tier and class under extra keys). memory_snapshot.pickle holds the same snapshot pickled: drag it "
         "onto pytorch.org/memory_viz, which reads pickles only.</li>\n</ul>\n</section>\n";
}

// ---- embedded data for the charts -----------------------------------------------------------------
nlohmann::json series_json(const StackedSeries& s) {
  nlohmann::json t = nlohmann::json::array(), values = nlohmann::json::array();
  for (double x : s.t) t.push_back(ns(x));
  for (const auto& v : s.values) values.push_back(v);
  return {{"names", s.names}, {"t", t}, {"end", ns(s.end_ns)}, {"values", values}};
}

std::string chart_data(const ReportModel& m, const std::vector<DevicePageMap>& maps, const GroupMap* groups) {
  nlohmann::json d;
  nlohmann::json classes = nlohmann::json::array();
  for (int c = 0; c < kTensorClassCount; ++c) classes.push_back(to_string(static_cast<TensorClass>(c)));
  d["classes"] = classes;
  d["iteration_ns"] = ns(m.axis.end_ns());
  d["budget"] = m.budget_bytes ? nlohmann::json{{"bytes", m.budget_bytes}, {"source", m.budget_source}, {"tier", m.fast_tier_name}}
                               : nlohmann::json(nullptr);
  nlohmann::json memory = nlohmann::json::array();
  for (const auto& c : m.memory) {
    auto j = series_json(c.series);
    j["title"] = c.title;
    j["source"] = c.source;
    j["peak"] = c.peak_total;
    j["fast_peak"] = c.fast_peak;
    memory.push_back(std::move(j));
  }
  d["memory"] = memory;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : m.lifetimes.rows) {
    nlohmann::json uses = nlohmann::json::array();
    for (double u : r.use_ns) uses.push_back(ns(u));
    rows.push_back({{"id", r.tensor.id}, {"seq", r.tensor.seq}, {"bytes", r.tensor.bytes}, {"cls", static_cast<int>(r.tensor.cls)},
                    {"b", ns(r.tensor.begin_ns)}, {"e", ns(r.tensor.end_ns)}, {"uses", uses}, {"nuses", r.tensor.uses},
                    {"op", r.tensor.alloc_op}, {"src", r.tensor.source}, {"mod", r.tensor.module},
                    {"where", r.tensor.where}});
  }
  d["lifetimes"] = {{"rows", rows}, {"others", series_json(m.lifetimes.others)}, {"others_count", m.lifetimes.others_count}};
  nlohmann::json pms = nlohmann::json::array();
  for (const auto& pm : maps) {
    std::string cells;
    cells.reserve(pm.cells.size());
    for (auto c : pm.cells) cells += kCellAlphabet[c & 63];
    pms.push_back({{"name", pm.name}, {"page_size", pm.page_size}, {"pages", pm.pages}, {"ppc", pm.pages_per_cell}, {"cells", cells}});
  }
  d["pagemaps"] = pms;
  if (groups && !groups->cells.empty()) {
    nlohmann::json cells = nlohmann::json::array();
    std::uint64_t total = 0;
    for (const auto& c : groups->cells) {
      cells.push_back({c.bytes, static_cast<int>(c.cls), c.pinned ? 1 : 0, c.groups, c.mixed ? 1 : 0});
      total += c.bytes;
    }
    // About twelve lines of groups, whatever the total.
    const std::uint64_t line = std::max<std::uint64_t>(total / 12 + 1, 1);
    d["groups"] = {{"cells", cells}, {"count", groups->groups}, {"bytes", total}, {"line_bytes", line}};
  } else {
    d["groups"] = nullptr;
  }
  nlohmann::json migrations = nlohmann::json::array();
  for (const auto& r : m.migrations) {
    nlohmann::json items = nlohmann::json::array();
    for (const auto& it : r.items) items.push_back({ns(it.begin_ns), ns(it.end_ns), it.bytes, it.count, it.group});
    migrations.push_back({{"name", r.name}, {"kind", r.kind}, {"source", r.source}, {"count", r.total_count}, {"items", items}});
  }
  d["migrations"] = migrations;
  // '<' never occurs outside strings in JSON; escaping it keeps "</script>" and "<!--" out of the page.
  std::string text = d.dump();
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '<') out += "\\u003c";
    else out += c;
  }
  return out;
}

std::string header(const ReportModel& m) {
  const Profile& p = *m.profile;
  std::ostringstream o;
  const std::string title = p.meta.command.empty() ? "tierpack report" : "tierpack report: " + p.meta.command;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    << "<meta name=\"generator\" content=\"tierpack " << TIERPACK_VERSION << "\">\n"
    << "<title>" << html_escape(title) << "</title>\n<style>\n" << kReportCss << "</style>\n</head>\n<body>\n"
    << "<header><h1>tierpack report</h1><p class=\"meta\">";
  auto field = [&](const char* name, const std::string& v) {
    if (!v.empty()) o << "<b>" << name << "</b> " << html_escape(v) << " &nbsp; ";
  };
  field("profile", m.inputs.profile_path);
  field("command", p.meta.command);
  field("framework", p.meta.framework);
  field("page tracer", p.meta.page_tracer);
  field("host", p.topology.hostname);
  if (p.meta.created_unix > 0) {
    std::time_t t = static_cast<std::time_t>(p.meta.created_unix);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
    field("recorded", buf);
  }
  field("plan", m.inputs.plan_path);
  field("run statistics", m.inputs.run_stats_path);
  o << "</p></header>\n<nav>";
  const char* names[] = {"Summary", "Memory", "Lifetimes", "Page map", "Migrations", "Top tensors", "Classes",
                         "False sharing", "Hidden accesses", "Divergence", "Savings", "GPU choices", "Files"};
  const auto& ids = html_section_ids();
  for (std::size_t i = 0; i < ids.size(); ++i) o << "<a href=\"#" << ids[i] << "\">" << names[i] << "</a>";
  o << "</nav>\n<main>\n";
  return o.str();
}

}  // namespace

const std::vector<std::string_view>& html_section_ids() {
  static const std::vector<std::string_view> ids = {"summary",       "memory",        "lifetimes",       "page-map",
                                                    "migrations",    "top-tensors",   "classes",         "false-sharing",
                                                    "hidden-accesses", "divergence", "savings",         "gpu-choices", "files"};
  return ids;
}

std::string render_html(const ReportModel& m) {
  const auto maps = build_page_maps(*m.profile, m.classes, m.options.page_map_cells);
  std::optional<GroupMap> groups;
  if (m.plan) groups = build_group_map(*m.plan, m.options.page_map_cells);
  const GroupMap* g = groups ? &*groups : nullptr;
  std::string html = header(m);
  html += section_summary(m);
  html += section_memory(m);
  html += section_lifetimes(m);
  html += section_pages(maps, g);
  html += section_migrations(m);
  html += section_top_tensors(m);
  html += section_classes(m);
  html += section_false_sharing(m);
  html += section_hidden(m);
  html += section_divergence(m);
  html += section_savings(m);
  html += section_gpu_choices(m);
  html += section_files(m);
  html += "</main>\n<footer>Generated by tierpack " + std::string(TIERPACK_VERSION) +
          " from the inputs named above; every number on this page is computed from them. Times are from the start of the "
          "profiled iteration.</footer>\n<div id=\"tooltip\" hidden></div>\n";
  html += "<script type=\"application/json\" id=\"report-data\">" + chart_data(m, maps, g) + "</script>\n";
  html += "<script>\n" + std::string(kReportJs) + "</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace tierpack::report
