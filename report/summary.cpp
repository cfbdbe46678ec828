// The report's shared statistics (see summary.hpp). Each section of index.html, the counters of
// trace.json and the tier keys of memory_snapshot.json read these numbers; nothing is computed twice.
#include "report/summary.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "core/error.hpp"
#include "report/detail/text.hpp"
#include "placer/classify.hpp"
#include "placer/cost_model.hpp"
#include "placer/pack.hpp"
#include "placer/plan_check.hpp"
#include "placer/prediction_bound.hpp"

namespace tierpack::report {
namespace {

using detail::bytes_short;
using detail::duration_short;
using detail::percent;
using detail::with_commas;

std::size_t slot(OpIndex k) { return static_cast<std::size_t>(k + 1); }

// The op step a tensor is born in and the last step it is alive in (see Note [Report time axis]).
std::pair<OpIndex, OpIndex> live_steps(const TensorRecord& t, OpIndex n) {
  const OpIndex born = std::clamp<OpIndex>(t.birth_op, -1, n);
  const OpIndex last = t.death_op == kAfterIteration ? n : std::clamp<OpIndex>(t.death_op, born, n);
  return {born, last};
}

// Name of the tier a tensor's bytes are charged to on the memory charts.
class TierNamer {
 public:
  explicit TierNamer(const Topology& topo) : topo_(topo) {}
  std::string operator()(const TensorRecord& t) const {
    if (t.tier != kNoTier && t.tier < topo_.tiers.size()) return topo_.tiers[t.tier].name;
    return default_for(t.device);
  }
  std::string default_for(int device) const {
    if (device >= 0) {
      for (const auto& tier : topo_.tiers)
        if (tier.kind == TierKind::gpu && tier.device == device) return tier.name;
      return device_name(device) + " (tier unknown)";
    }
    const auto dram = topo_.of_kind(TierKind::host_dram);
    if (dram.size() == 1) return topo_.tiers[dram.front()].name;
    return "host (tier unknown)";
  }

 private:
  const Topology& topo_;
};

// Per-device sweep over op steps: live bytes per class at each step.
struct DeviceSweep {
  std::vector<std::array<std::int64_t, kTensorClassCount>> delta;  // by slot
};

void fill_devices(ReportModel& m) {
  const Profile& p = *m.profile;
  const OpIndex n = m.axis.ops();
  std::map<int, DeviceSweep> sweeps;
  std::map<int, std::uint64_t> counts;
  for (const auto& t : p.tensors) {
    auto& sw = sweeps[t.device];
    if (sw.delta.empty()) sw.delta.assign(static_cast<std::size_t>(n) + 3, {});
    const auto [born, last] = live_steps(t, n);
    const auto c = static_cast<std::size_t>(m.classes[t.id]);
    sw.delta[slot(born)][c] += static_cast<std::int64_t>(t.bytes);
    sw.delta[slot(last) + 1][c] -= static_cast<std::int64_t>(t.bytes);
    ++counts[t.device];
  }
  for (auto& [device, sw] : sweeps) {
    DeviceSummary d;
    d.device = device;
    d.name = device_name(device);
    d.tensors = counts[device];
    std::array<std::int64_t, kTensorClassCount> live{};
    for (std::size_t s = 0; s + 1 < sw.delta.size(); ++s) {
      std::int64_t total = 0;
      for (std::size_t c = 0; c < live.size(); ++c) total += (live[c] += sw.delta[s][c]);
      if (total > static_cast<std::int64_t>(d.peak_bytes)) {
        d.peak_bytes = static_cast<std::uint64_t>(total);
        d.peak_step = static_cast<OpIndex>(s) - 1;
        for (std::size_t c = 0; c < live.size(); ++c) d.peak_by_class[c] = static_cast<std::uint64_t>(live[c]);
      }
    }
    d.peak_t_ns = m.axis.step_begin(d.peak_step);
    m.devices.push_back(d);
  }
  // Budgets refer to the busiest GPU, or to the host when the profile has no GPU tensors.
  std::size_t best = 0;
  for (std::size_t i = 0; i < m.devices.size(); ++i) {
    const auto& a = m.devices[i];
    const auto& b = m.devices[best];
    const bool a_gpu = a.device >= 0, b_gpu = b.device >= 0;
    if ((a_gpu && !b_gpu) || (a_gpu == b_gpu && a.peak_bytes > b.peak_bytes)) best = i;
  }
  m.main_device = best;
}

void fill_idle_at_peak(ReportModel& m) {
  for (auto& d : m.devices) {
    const double mid = (m.axis.step_begin(d.peak_step) + m.axis.step_end(d.peak_step)) / 2;
    for (const auto& t : m.profile->tensors) {
      if (t.device != d.device) continue;
      const auto [born, last] = live_steps(t, m.axis.ops());
      if (d.peak_step < born || d.peak_step > last) continue;
      for (const auto& g : idle_gaps(t, m.axis))
        if (g.begin_ns <= mid && mid <= g.end_ns && g.length_ns > m.idle_threshold_ns) {
          d.idle_at_peak_bytes += t.bytes;
          break;
        }
    }
  }
}

// Orders tier names so the fast tier is the bottom band of every memory chart.
std::vector<std::string> ordered_tiers(std::vector<std::string> names, const std::string& fast) {
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  auto it = std::find(names.begin(), names.end(), fast);
  if (it != names.end()) std::rotate(names.begin(), it, it + 1);
  return names;
}

std::size_t index_of(const std::vector<std::string>& names, const std::string& n) {
  return static_cast<std::size_t>(std::find(names.begin(), names.end(), n) - names.begin());
}

void finish_chart(ReportModel& m, std::string title, std::string source, StackedSeries full) {
  MemoryChart chart;
  chart.title = std::move(title);
  chart.source = std::move(source);
  chart.peak_total = full.peak_total();
  chart.fast_peak = full.values.empty() ? 0 : full.peak_of(0);
  chart.series = downsample(full, m.options.max_series_points);
  chart.full = std::move(full);
  m.memory.push_back(std::move(chart));
}

void fill_profile_chart(ReportModel& m) {
  const Profile& p = *m.profile;
  const TierNamer namer(p.topology);
  std::vector<std::string> names;
  for (const auto& t : p.tensors) names.push_back(namer(t));
  names = ordered_tiers(std::move(names), m.fast_tier_name);
  SeriesBuilder b(names);
  const OpIndex n = m.axis.ops();
  for (const auto& t : p.tensors) {
    const auto series = index_of(names, namer(t));
    const auto [born, last] = live_steps(t, n);
    b.add(m.axis.step_begin(born), born, series, static_cast<std::int64_t>(t.bytes));
    if (last < n) b.add(m.axis.step_begin(last + 1), last + 1, series, -static_cast<std::int64_t>(t.bytes));
  }
  finish_chart(m, "Profiled run (no tierpack)", "profile", b.build(m.axis.end_ns()));
}

// Planned occupancy, by the placer's own accounting (Note [Fast-tier accounting] in
// placer/plan_check.hpp): per op, the bytes of the plan's page groups held on the fast tier, and the
// rest of the groups' bytes (held then) on the slow tier. Groups grow as tensors are allocated into
// them, so this follows the plan's packing, not the tensors' exact sizes.
void fill_plan_chart(ReportModel& m) {
  const Plan& plan = *m.plan;
  const Profile& p = *m.profile;
  std::size_t mismatched = 0;
  for (const auto& pl : plan.placements)
    if (pl.tensor >= p.tensors.size() || p.tensors[pl.tensor].bytes != pl.bytes || pl.group >= plan.groups.size()) ++mismatched;
  if (mismatched > 0) {
    m.warnings.push_back(with_commas(mismatched) + " of " + with_commas(plan.placements.size()) +
                         " placements of the plan do not match the profile's tensors (a plan for another profile?); "
                         "no planned memory chart");
    return;
  }
  if (plan.groups.empty()) {
    m.warnings.push_back("the plan has no page groups; no planned memory chart");
    return;
  }
  const OpIndex n = m.axis.ops();
  const auto lives = placer::group_lives(p, plan);
  const auto fast = placer::fast_occupancy(plan.groups, lives, plan.schedule, plan.fast_tier, n);
  std::vector<std::int64_t> held(static_cast<std::size_t>(n) + 1, 0);
  for (const auto& life : lives) placer::add_group_bytes(held, life, life.first_op(), life.last_op(n), +1);
  auto tier_name = [&](TierId id) {
    return id < plan.topology.tiers.size() ? plan.topology.tiers[id].name : "tier " + std::to_string(id);
  };
  SeriesBuilder b({tier_name(plan.fast_tier), tier_name(plan.slow_tier)});
  std::int64_t total = 0, prev_fast = 0, prev_slow = 0;
  for (OpIndex i = 0; i < n; ++i) {
    total += held[static_cast<std::size_t>(i)];
    const auto f = static_cast<std::int64_t>(fast[static_cast<std::size_t>(i)]);
    const std::int64_t slow = std::max<std::int64_t>(total - f, 0);
    b.add(m.axis.step_begin(i), i, 0, f - prev_fast);
    b.add(m.axis.step_begin(i), i, 1, slow - prev_slow);
    prev_fast = f, prev_slow = slow;
  }
  finish_chart(m, "Planned (" + plan.policy + ", budget " + bytes_short(plan.fast_budget_bytes) + ", " + device_name(plan.device) + ")",
               "plan", b.build(m.axis.end_ns()));
}

void fill_run_chart(ReportModel& m) {
  const RunStats& run = *m.run;
  if (run.occupancy.empty()) return;
  const Topology& topo = m.plan ? m.plan->topology : m.profile->topology;
  auto tier_name = [&](TierId id) { return id < topo.tiers.size() ? topo.tiers[id].name : "tier " + std::to_string(id); };
  std::vector<std::string> names;
  for (const auto& o : run.occupancy) names.push_back(tier_name(o.tier));
  names = ordered_tiers(std::move(names), m.fast_tier_name);
  SeriesBuilder b(names);
  double end = m.axis.end_ns();
  for (const auto& o : run.occupancy) {
    // Samples of one time form one point (all tiers at once), never a half-updated one.
    b.set(static_cast<double>(o.t_ns), 0, index_of(names, tier_name(o.tier)), o.bytes);
    end = std::max(end, static_cast<double>(o.t_ns));
  }
  std::string title = "Measured under tierpack";
  if (!run.source.empty()) title += " (" + run.source + ")";
  for (const auto& e : run.emulated_tiers) title += ", " + e + " EMULATED on node 0";
  finish_chart(m, title, "run", b.build(end));
}

TensorRow tensor_row(const ReportModel& m, const TensorRecord& t) {
  TensorRow r;
  r.id = t.id;
  r.seq = t.seq;
  r.bytes = t.bytes;
  r.begin_ns = m.axis.tensor_begin(t);
  r.end_ns = m.axis.tensor_end(t);
  r.cls = m.classes[t.id];
  r.alloc_op = t.alloc_op;
  r.source = m.profile->source_text(t);
  r.module = m.profile->module_text(t);
  r.uses = static_cast<std::uint32_t>(t.uses.size());
  r.where = TierNamer(m.profile->topology)(t);
  r.flags = t.flags;
  return r;
}

void fill_tensors(ReportModel& m) {
  const Profile& p = *m.profile;
  std::vector<TensorId> ids(p.tensors.size());
  std::iota(ids.begin(), ids.end(), 0);
  auto lifetime = [&](TensorId id) { return m.axis.tensor_end(p.tensors[id]) - m.axis.tensor_begin(p.tensors[id]); };
  // Top tensors by bytes x lifetime.
  const std::size_t top = std::min(m.options.top_tensors, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(top), ids.end(), [&](TensorId a, TensorId b) {
    const double x = static_cast<double>(p.tensors[a].bytes) * lifetime(a), y = static_cast<double>(p.tensors[b].bytes) * lifetime(b);
    return x != y ? x > y : a < b;
  });
  for (std::size_t i = 0; i < top; ++i) m.top_tensors.push_back(tensor_row(m, p.tensors[ids[i]]));

  // Lifetime chart: the largest tensors one per row, the rest per class.
  const std::size_t rows = std::min(m.options.lifetime_rows, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(rows), ids.end(), [&](TensorId a, TensorId b) {
    return p.tensors[a].bytes != p.tensors[b].bytes ? p.tensors[a].bytes > p.tensors[b].bytes : a < b;
  });
  std::vector<bool> in_rows(p.tensors.size(), false);
  for (std::size_t i = 0; i < rows; ++i) {
    const auto& t = p.tensors[ids[i]];
    in_rows[t.id] = true;
    LifetimeChart::Row row{tensor_row(m, t), {}};
    const std::size_t n_uses = t.uses.size(), keep = std::min(n_uses, m.options.max_use_ticks);
    for (std::size_t k = 0; k < keep; ++k) {
      const std::size_t u = keep == n_uses ? k : k * (n_uses - 1) / std::max<std::size_t>(keep - 1, 1);
      row.use_ns.push_back(m.axis.op_begin(t.uses[u]));
    }
    m.lifetimes.rows.push_back(std::move(row));
  }
  std::vector<std::string> class_names;
  for (int c = 0; c < kTensorClassCount; ++c) class_names.emplace_back(to_string(static_cast<TensorClass>(c)));
  SeriesBuilder others(class_names);
  const OpIndex n = m.axis.ops();
  for (const auto& t : p.tensors) {
    if (in_rows[t.id]) continue;
    const auto c = static_cast<std::size_t>(m.classes[t.id]);
    ++m.lifetimes.others_count[c];
    const auto [born, last] = live_steps(t, n);
    others.add(m.axis.step_begin(born), born, c, static_cast<std::int64_t>(t.bytes));
    if (last < n) others.add(m.axis.step_begin(last + 1), last + 1, c, -static_cast<std::int64_t>(t.bytes));
  }
  m.lifetimes.others = downsample(others.build(m.axis.end_ns()), std::min<std::size_t>(m.options.max_series_points, 800));

  // Classes.
  std::array<double, kTensorClassCount> lifetime_sum{};
  std::array<std::vector<std::int64_t>, kTensorClassCount> delta;
  for (auto& d : delta) d.assign(static_cast<std::size_t>(n) + 3, 0);
  for (int c = 0; c < kTensorClassCount; ++c) m.class_rows[static_cast<std::size_t>(c)].cls = static_cast<TensorClass>(c);
  for (const auto& t : p.tensors) {
    const auto c = static_cast<std::size_t>(m.classes[t.id]);
    auto& row = m.class_rows[c];
    ++row.count;
    row.bytes += t.bytes;
    row.uses += t.uses.size();
    if (t.has(kTensorFalseShared)) ++row.false_shared;
    if (t.has(kTensorHiddenAccess)) ++row.hidden;
    lifetime_sum[c] += lifetime(t.id);
    const auto [born, last] = live_steps(t, n);
    delta[c][slot(born)] += static_cast<std::int64_t>(t.bytes);
    delta[c][slot(last) + 1] -= static_cast<std::int64_t>(t.bytes);
  }
  for (std::size_t c = 0; c < delta.size(); ++c) {
    auto& row = m.class_rows[c];
    if (row.count) row.mean_lifetime_ns = lifetime_sum[c] / static_cast<double>(row.count);
    std::int64_t live = 0;
    for (auto d : delta[c]) row.peak_live_bytes = std::max<std::uint64_t>(row.peak_live_bytes, static_cast<std::uint64_t>(std::max<std::int64_t>(live += d, 0)));
  }
}

void fill_pages(ReportModel& m) {
  const Profile& p = *m.profile;
  auto& s = m.pages;
  std::vector<PageRow> fs, hidden;
  for (const auto& page : p.pages) {
    ++s.notable_pages;
    PageRow row{page.address, page.numa_node, page.tensors, 0, page.touch_windows, page.hidden_windows, page.written};
    for (auto t : page.tensors) row.class_mask |= 1u << static_cast<unsigned>(m.classes[t]);
    if (page.false_shared) ++s.false_shared_pages, fs.push_back(row);
    if (page.hidden_windows > 0) ++s.hidden_pages, s.hidden_windows += page.hidden_windows, hidden.push_back(row);
  }
  for (const auto& t : p.tensors) {
    if (t.has(kTensorFalseShared)) ++s.false_shared_tensors, s.false_shared_tensor_bytes += t.bytes;
    if (t.has(kTensorHiddenAccess)) ++s.hidden_tensors, s.hidden_tensor_bytes += t.bytes;
  }
  auto keep = [&](std::vector<PageRow>& v, auto better) {
    const std::size_t k = std::min(v.size(), m.options.table_rows);
    std::partial_sort(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end(), better);
    v.resize(k);
    return v;
  };
  s.top_false_shared = keep(fs, [](const PageRow& a, const PageRow& b) {
    return a.tensors.size() != b.tensors.size() ? a.tensors.size() > b.tensors.size() : a.address < b.address;
  });
  s.top_hidden = keep(hidden, [](const PageRow& a, const PageRow& b) {
    return a.hidden_windows != b.hidden_windows ? a.hidden_windows > b.hidden_windows : a.address < b.address;
  });
}

// Many migrations are merged into at most `cap` items per row (consecutive moves, in time order).
MigrationRow migration_row(std::string name, std::string kind, std::string source, std::vector<MigrationItem> items,
                           std::size_t cap) {
  MigrationRow row{std::move(name), std::move(kind), std::move(source), 0, 0, 0, {}};
  std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.begin_ns < b.begin_ns; });
  for (const auto& it : items) row.total_count += it.count, row.total_bytes += it.bytes, row.total_ns += it.end_ns - it.begin_ns;
  const std::size_t per = std::max<std::size_t>(1, (items.size() + cap - 1) / std::max<std::size_t>(cap, 1));
  for (std::size_t i = 0; i < items.size(); i += per) {
    MigrationItem merged = items[i];
    for (std::size_t j = i + 1; j < std::min(items.size(), i + per); ++j) {
      merged.end_ns = std::max(merged.end_ns, items[j].end_ns);
      merged.bytes += items[j].bytes;
      merged.count += items[j].count;
    }
    row.items.push_back(merged);
  }
  return row;
}

void fill_migrations(ReportModel& m) {
  const std::size_t cap = m.options.max_migration_items;
  if (m.plan) {
    std::vector<MigrationItem> ev, pf;
    for (const auto& mv : m.plan->schedule) {
      MigrationItem it{mv.predicted_start_ns, std::max(mv.predicted_end_ns, mv.predicted_start_ns), mv.bytes, 1, mv.group};
      (mv.kind == MoveKind::evict ? ev : pf).push_back(it);
    }
    m.migrations.push_back(migration_row("predicted evictions", "evict", "plan", std::move(ev), cap));
    m.migrations.push_back(migration_row("predicted prefetches", "prefetch", "plan", std::move(pf), cap));
  }
  if (m.run) {
    std::vector<MigrationItem> ev, pf, st;
    for (const auto& mv : m.run->moves) {
      MigrationItem it{static_cast<double>(mv.start_ns), static_cast<double>(mv.end_ns), mv.bytes, 1, mv.group};
      (mv.kind == MoveKind::evict ? ev : pf).push_back(it);
    }
    for (const auto& s : m.run->stalls)
      st.push_back({static_cast<double>(s.start_ns), static_cast<double>(s.start_ns + s.duration_ns), 0, 1, s.group});
    m.migrations.push_back(migration_row("measured evictions", "evict", "run", std::move(ev), cap));
    m.migrations.push_back(migration_row("measured prefetches", "prefetch", "run", std::move(pf), cap));
    m.migrations.push_back(migration_row("measured stalls", "stall", "run", std::move(st), cap));
  }
}

std::string describe_model(const TierModel& model) {
  std::string s;
  for (const auto& t : model.tiers) s += (s.empty() ? "" : " + ") + t.name + " " + bytes_short(t.capacity_bytes);
  return s;
}

// The tier model the planner uses: --tiers, else the plan's, else the profile's when it has a fast
// and a slow tier for the device; else a preset, said so.
std::pair<TierModel, std::string> savings_model(const ReportModel& m, int device) {
  if (m.options.tier_model) return {*m.options.tier_model, m.options.tier_model_source};
  if (m.plan) return {m.plan->topology, "the plan's tier model"};
  const Topology& topo = m.profile->topology;
  try {
    validate_tier_model(topo);
    if (placer::choose_tiers(topo, device).slow != kNoTier) return {topo, "the tiers recorded in the profile"};
  } catch (const logic_error&) {
  }
  const std::string preset = device >= 0 ? "h200-pcie" : "ddr5-cxl";
  return {tier_preset(preset), "assumed: preset:" + preset + " (the profile records " + std::to_string(topo.tiers.size()) +
                                   " tier(s), not a fast and a slow one; pass --tiers for another model)"};
}

void fill_savings(ReportModel& m) {
  const Profile& p = *m.profile;
  auto& s = m.savings;
  const auto& dev = m.devices[m.main_device];
  s.device = dev.device;
  s.peak_bytes = dev.peak_bytes;
  s.iteration_ns = m.axis.end_ns();
  const auto [model, source] = savings_model(m, dev.device);
  s.model = describe_model(model);
  s.model_source = source;
  s.bandwidth = fast_to_slow_bandwidth(model, dev.device);
  s.method =
      "Each budget row is a plan made by the placer (classify, pack page groups, assign tiers under the budget, "
      "schedule evictions and prefetches) with the step time its simulator predicts, as `tierpack plan` would make it.";
  std::vector<std::pair<Budget, std::string>> budgets;
  for (double f : m.options.budget_fractions)
    if (f > 0) {
      Budget b;
      b.fraction = f;
      budgets.push_back({b, percent(f, 1) + " of peak"});
    }
  if (m.options.budget_bytes) {
    Budget b;
    b.bytes = m.options.budget_bytes;
    budgets.push_back({b, "--budget " + bytes_short(m.options.budget_bytes)});
  }
  auto bytes_of = [&](const Budget& b) { return b.resolve(dev.peak_bytes); };
  std::stable_sort(budgets.begin(), budgets.end(), [&](auto& a, auto& b) { return bytes_of(a.first) > bytes_of(b.first); });
  s.rows = plan_at_budgets(p, model, dev.device, dev.peak_bytes, budgets);
  if (m.plan) {
    const auto& pr = m.plan->prediction;
    SavingsRow row;
    row.label = "given plan (" + m.plan->policy + ")";
    row.source = "plan";
    row.budget_bytes = m.plan->fast_budget_bytes;
    row.fast_peak_bytes = pr.fast_peak_bytes;
    const std::uint64_t peak = m.plan->device == dev.device ? dev.peak_bytes : pr.natural_peak_bytes;
    row.saved_bytes = peak > pr.fast_peak_bytes ? peak - pr.fast_peak_bytes : 0;
    row.bytes_to_fast = pr.bytes_to_fast;
    row.bytes_to_slow = pr.bytes_to_slow;
    row.moves = m.plan->schedule.size();
    row.copy_ns = s.bandwidth > 0 ? static_cast<double>(std::max(pr.bytes_to_fast, pr.bytes_to_slow)) / s.bandwidth * 1e9 : 0;
    row.step_ns = pr.step_ns;
    row.stall_ns = pr.stall_ns;
    row.fits = m.plan->fast_budget_bytes == 0 || pr.fast_peak_bytes <= m.plan->fast_budget_bytes;
    s.rows.push_back(row);
  }
  // Note [Lower-bound predictions]: the profile's op times, then the predictions whose moves hide.
  s.lower_bound = placer::op_time_reasons(p, dev.device);
  {
    std::string hidden;
    for (const auto& row : s.rows)
      if (row.bytes_to_fast + row.bytes_to_slow > 0 && row.fits && row.step_ns <= 1.01 * s.iteration_ns)
        hidden += (hidden.empty() ? "" : ", ") + row.label;
    if (!hidden.empty())
      s.lower_bound.push_back("the moves of " + hidden + " hide under the profiled compute (within 1% of the profiled step): "
                              "that holds only while a real step computes as long and copies do not slow compute (not modelled)");
  }
  if (m.run && !m.run->iterations.empty()) {
    SavingsRow row;
    row.label = m.run->emulated_tiers.empty() ? "measured run" : "measured run (emulated tier)";
    row.source = "run";
    row.budget_bytes = m.run->fast_budget_bytes;
    const double k = static_cast<double>(m.run->iterations.size());
    const RunCounters c = run_counters(*m.run);  // Note [Run counters]: the definitions the CLI uses
    double step = 0;
    for (const auto& it : m.run->iterations) step += static_cast<double>(it.step_ns);
    row.bytes_to_fast = static_cast<std::uint64_t>(static_cast<double>(c.bytes_to_fast) / k);
    row.bytes_to_slow = static_cast<std::uint64_t>(static_cast<double>(c.bytes_to_slow) / k);
    row.stall_measured = c.stall_ns_measured;
    row.late_prefetches = static_cast<double>(c.late_prefetches) / k;
    row.moves = m.run->moves.size();
    row.copy_ns = s.bandwidth > 0 ? static_cast<double>(std::max(row.bytes_to_fast, row.bytes_to_slow)) / s.bandwidth * 1e9 : 0;
    row.step_ns = step / k;
    row.stall_ns = static_cast<double>(c.stall_ns) / k;
    if (!m.memory.empty() && m.memory.back().source == "run") {
      row.fast_peak_bytes = m.memory.back().fast_peak;
      row.saved_bytes = dev.peak_bytes > row.fast_peak_bytes ? dev.peak_bytes - row.fast_peak_bytes : 0;
      row.fits = row.budget_bytes == 0 || row.fast_peak_bytes <= row.budget_bytes;
    }
    s.rows.push_back(row);
  }
}

std::string op_label(const Profile& p, OpIndex k) {
  if (k < 0) return "before the first op";
  if (k >= static_cast<OpIndex>(p.ops.size())) return "after the last op";
  const auto& op = p.ops[static_cast<std::size_t>(k)];
  std::string s = "op " + std::to_string(k) + " " + op.name;
  if (op.phase != Phase::unknown) s += ", " + std::string(to_string(op.phase));
  return s;
}

void fill_sentences(ReportModel& m) {
  const Profile& p = *m.profile;
  auto& out = m.summary;
  const double iter = m.axis.end_ns();
  {
    std::string s = "Profiled iteration";
    if (p.meta.profiled_iteration >= 0) s += " " + std::to_string(p.meta.profiled_iteration);
    if (p.meta.iterations_observed > 0) s += " of " + std::to_string(p.meta.iterations_observed) + " observed";
    if (!p.meta.iteration_source.empty()) s += " (boundaries: " + p.meta.iteration_source + ")";
    std::uint64_t allocated = 0;
    for (const auto& t : p.tensors) allocated += t.birth_op != kBeforeIteration ? t.bytes : 0;
    s += ": " + duration_short(iter) + ", " + with_commas(p.ops.size()) + " ops, " + with_commas(p.tensors.size()) +
         " tensors, " + bytes_short(allocated) + " allocated during the iteration.";
    out.push_back(s);
  }
  if (m.devices.empty()) {
    out.push_back("The profile has no tensors.");
    return;
  }
  for (std::size_t i = 0; i < m.devices.size(); ++i) {
    const auto& d = m.devices[i];
    if (i != m.main_device && d.peak_bytes * 10 < m.devices[m.main_device].peak_bytes) continue;  // minor devices
    std::string s = "Peak " + bytes_short(d.peak_bytes) + " on " + d.name + " at " + duration_short(d.peak_t_ns) + " (" +
                    percent(d.peak_t_ns, iter) + " into the iteration, " + op_label(p, d.peak_step) + "); " +
                    bytes_short(d.idle_at_peak_bytes) + " of it (" + percent(static_cast<double>(d.idle_at_peak_bytes), static_cast<double>(d.peak_bytes)) +
                    ") sits idle for > " + duration_short(m.idle_threshold_ns) + " around that moment.";
    out.push_back(s);
    std::string c = "At that peak: ";
    bool first = true;
    std::array<std::size_t, kTensorClassCount> order{0, 1, 2, 3};
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return d.peak_by_class[a] > d.peak_by_class[b]; });
    for (auto k : order) {
      if (d.peak_by_class[k] == 0) continue;
      c += std::string(first ? "" : ", ") + std::string(to_string(static_cast<TensorClass>(k))) + " " +
           bytes_short(d.peak_by_class[k]) + " (" + percent(static_cast<double>(d.peak_by_class[k]), static_cast<double>(d.peak_bytes)) + ")";
      first = false;
    }
    out.push_back(c + ".");
  }
  const auto& ps = m.pages;
  if (p.meta.page_tracer == "none" || (p.meta.page_tracer.empty() && ps.notable_pages == 0)) {
    out.push_back("No page data: the profile was taken without a page tracer, so false sharing and hidden accesses are unknown.");
  } else {
    out.push_back(with_commas(ps.false_shared_pages) + (ps.false_shared_pages == 1 ? " page holds" : " pages hold") +
                  " tensors of different lifetime classes (" +
                  with_commas(ps.false_shared_tensors) + " tensors, " + bytes_short(ps.false_shared_tensor_bytes) +
                  " flagged false-shared); " + with_commas(ps.hidden_pages) + (ps.hidden_pages == 1 ? " page was" : " pages were") + " touched in " +
                  with_commas(ps.hidden_windows) + " op windows in which no reported op used them (" +
                  with_commas(ps.hidden_tensors) + " tensors, " + bytes_short(ps.hidden_tensor_bytes) + ").");
  }
  {
    std::size_t diverged = 0;
    for (const auto& it : p.iterations) diverged += it.matches_profiled ? 0 : 1;
    if (p.iterations.empty()) {
      out.push_back("No iteration signatures recorded: divergence between iterations is unknown.");
    } else if (diverged == 0 && p.divergences.empty()) {
      out.push_back("All " + with_commas(p.iterations.size()) + " observed iterations allocate like the profiled one.");
    } else {
      std::string s = with_commas(diverged) + " of " + with_commas(p.iterations.size()) +
                      " observed iterations allocate differently from the profiled one";
      if (!p.divergences.empty()) {
        const auto& d = p.divergences.front();
        s += "; first at iteration " + std::to_string(d.iteration) + ", seq " + std::to_string(d.seq) + ": " + d.reason;
      }
      out.push_back(s + ". A plan made from this profile falls back to the default placement there.");
    }
  }
  // The largest saving whose predicted step stays within kAcceptableSlowdown of the profiled one;
  // failing that, the fitting plan with the least slowdown (rows come largest budget first).
  constexpr double kAcceptableSlowdown = 1.10;
  const double base = m.axis.end_ns();
  const SavingsRow* best = nullptr;
  const SavingsRow* fastest = nullptr;
  for (const auto& row : m.savings.rows) {
    if (row.source != "planner" || !row.fits || row.saved_bytes == 0 || row.note.rfind("no plan", 0) == 0) continue;
    if (row.step_ns <= kAcceptableSlowdown * base && (!best || row.saved_bytes > best->saved_bytes)) best = &row;
    if (!fastest || row.step_ns < fastest->step_ns) fastest = &row;
  }
  const SavingsRow* shown = best ? best : fastest;
  if (shown) {
    out.push_back(std::string(best ? "Within 10% of the profiled step time: with" : "No budget below the peak keeps the step within 10%; the least costly:") +
                  " a fast-tier budget of " + bytes_short(shown->budget_bytes) + " (" + shown->label + "), tierpack's plan keeps " +
                  bytes_short(shown->fast_peak_bytes) + " on the fast tier (saving " + bytes_short(shown->saved_bytes) + ") and moves " +
                  bytes_short(shown->bytes_to_slow) + " out and " + bytes_short(shown->bytes_to_fast) +
                  " back per iteration; predicted step " + duration_short(shown->step_ns) + " (" +
                  (shown->step_ns >= base ? "+" : "") + percent(shown->step_ns - base, base) + " vs the profiled " +
                  duration_short(base) + "; tier model " + m.savings.model + ").");
  } else if (!m.savings.rows.empty()) {
    out.push_back("The planner fits none of the budgets below the peak on " + m.savings.model + " (see What tierpack would save).");
  }
  if (m.plan) {
    const auto& pr = m.plan->prediction;
    out.push_back("Plan (" + m.plan->policy + ", fast budget " + bytes_short(m.plan->fast_budget_bytes) + "): fast-tier peak " +
                  bytes_short(pr.fast_peak_bytes) + ", " + with_commas(m.plan->schedule.size()) + " moves, " +
                  bytes_short(pr.bytes_to_fast) + " to fast / " + bytes_short(pr.bytes_to_slow) +
                  " to slow per iteration, predicted stall " + duration_short(pr.stall_ns) + ", step " +
                  duration_short(pr.step_ns) + " vs " + duration_short(pr.baseline_step_ns) + " profiled.");
  }
  if (m.run && !m.run->iterations.empty()) {
    // Note [Run counters]: the words and sums `tierpack run` prints.
    const RunCounters c = run_counters(*m.run);
    std::string line = "Measured under tierpack (" + with_commas(m.run->iterations.size()) + " iterations): mean step ";
    for (const auto& row : m.savings.rows)
      if (row.source == "run") line += duration_short(row.step_ns);
    line += ", " + bytes_short(c.bytes_to_fast / c.iterations) + " to fast / " + bytes_short(c.bytes_to_slow / c.iterations) +
            " to slow per iteration; in all " + c.late_text() + ", " + with_commas(c.budget_fallbacks) +
            " budget fallback(s)";
    if (c.fast_peak_bytes)
      line += ", fast peak " + bytes_short(c.fast_peak_bytes) +
              (c.budget_bytes ? " of budget " + bytes_short(c.budget_bytes) : std::string()) +
              (c.over_budget_bytes() ? " (over it by " + bytes_short(c.over_budget_bytes()) + ")" : std::string());
    out.push_back(line + ".");
    // Note [Tiers this machine lacks] in runtime/host/run_controller.hpp.
    if (!m.run->emulated_tiers.empty()) {
      std::string names;
      for (const auto& e : m.run->emulated_tiers) names += (names.empty() ? "" : ", ") + e;
      out.push_back("EMULATED: the run's " + names + (m.run->emulated_tiers.size() == 1 ? " was" : " were") +
                    " not on the machine and was emulated on NUMA node 0: budget and moves were real, the memory was not "
                    "slower, so the measured step shows what the mechanism costs, not what slower memory costs.");
    }
    const std::uint64_t profiled_peak = m.devices[m.main_device].peak_bytes;
    if (c.fast_peak_bytes > profiled_peak) {
      std::string s = "The measured fast peak (" + bytes_short(c.fast_peak_bytes) + ") is above the profiled peak of live tensor bytes (" +
                      bytes_short(profiled_peak) + ") by " + bytes_short(c.fast_peak_bytes - profiled_peak) +
                      ": a run counts the bytes resident on the fast tier, not live tensor bytes";
      if (m.plan)
        s += "; the plan's page groups alone need " + bytes_short(m.plan->prediction.natural_peak_bytes) +
             " with everything resident (page rounding, partly filled groups) and it predicted a fast-tier peak of " +
             bytes_short(m.plan->prediction.fast_peak_bytes);
      s += "; the rest is memory the profile does not see as live tensors: allocator caching (on a GPU, what PyTorch's "
           "allocator reserved; Note [Reserved memory]) and tensors allocated outside the plan.";
      out.push_back(s);
    }
  }
  for (const auto& gpu : m.inputs.gpu_tiers) out.push_back("Measured on the " + gpu + ".");
  if (!m.savings.lower_bound.empty()) {
    std::string s = "Predicted step times are lower bounds: ";
    for (std::size_t i = 0; i < m.savings.lower_bound.size(); ++i) s += (i ? "; " : "") + m.savings.lower_bound[i];
    out.push_back(s + ".");
  }
}

}  // namespace

std::string device_name(int device) { return device < 0 ? "host" : "gpu" + std::to_string(device); }
std::string tensor_tier_name(const Topology& topo, const TensorRecord& t) { return TierNamer(topo)(t); }
std::string device_tier_name(const Topology& topo, int device) { return TierNamer(topo).default_for(device); }

double idle_threshold_for(double iteration_ns) {
  const double target = std::max(iteration_ns / 10, 1000.0);
  double best = 1000.0;
  for (double decade = 1000.0; decade <= target; decade *= 10)
    for (double f : {1.0, 2.0, 5.0})
      if (f * decade <= target) best = f * decade;
  return best;
}

ReportModel build_model(const ReportInputs& inputs, const ReportOptions& options) {
  TIERPACK_EXPECTS(inputs.profile != nullptr, "a report needs a profile");
  ReportModel m(*inputs.profile);
  m.plan = inputs.plan;
  m.run = inputs.run_stats;
  m.inputs = inputs;
  m.options = options;
  m.classes.reserve(m.profile->tensors.size());
  for (const auto& t : m.profile->tensors) m.classes.push_back(placer::classify_tensor(*m.profile, t));
  m.classifier = "classes by the placer (placer/classify.hpp), the ones its plans use";
  m.idle_threshold_ns = idle_threshold_for(m.axis.end_ns());
  fill_devices(m);
  fill_idle_at_peak(m);

  const TierNamer namer(m.profile->topology);
  if (m.plan && m.plan->fast_tier < m.plan->topology.tiers.size()) m.fast_tier_name = m.plan->topology.tiers[m.plan->fast_tier].name;
  else if (!m.devices.empty()) m.fast_tier_name = namer.default_for(m.devices[m.main_device].device);
  if (m.plan && m.plan->fast_budget_bytes) m.budget_bytes = m.plan->fast_budget_bytes, m.budget_source = "plan";
  else if (m.run && m.run->fast_budget_bytes) m.budget_bytes = m.run->fast_budget_bytes, m.budget_source = "run";
  else if (options.budget_bytes) m.budget_bytes = options.budget_bytes, m.budget_source = "--budget";

  fill_profile_chart(m);
  if (m.plan) fill_plan_chart(m);
  if (m.run) fill_run_chart(m);
  fill_tensors(m);
  fill_pages(m);
  fill_migrations(m);
  if (!m.devices.empty()) fill_savings(m);
  // Note [Profile identity]: another profile's plan or statistics never get here (the CLI refuses them,
  // and so does this call); one whose identity is unknown is shown with a warning.
  if (m.plan)
    if (auto w = check_profile_identity(*m.profile, inputs.profile_path, m.plan->profile_id, "plan", inputs.plan_path);
        !w.empty())
      m.warnings.push_back(std::move(w));
  if (m.run)
    if (auto w = check_profile_identity(*m.profile, inputs.profile_path, m.run->profile_id, "run statistics",
                                        inputs.run_stats_path);
        !w.empty())
      m.warnings.push_back(std::move(w));
  if (m.plan && m.plan->profile_signature != 0 && !m.profile->iterations.empty()) {
    bool known = false;
    for (const auto& it : m.profile->iterations) known = known || it.signature == m.plan->profile_signature;
    if (!known) m.warnings.push_back("the plan was made for an allocation signature that no iteration of this profile has");
  }
  fill_sentences(m);
  return m;
}

}  // namespace tierpack::report
