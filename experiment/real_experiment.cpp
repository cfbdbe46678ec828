// Real-nodes experiment (see real_experiment.hpp): one replay per policy and budget.
#include "experiment/real_experiment.hpp"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "core/error.hpp"
#include "core/units.hpp"
#include "experiment/host_replayer.hpp"
#include "experiment/kernel_tiering.hpp"
#include "experiment/node_policy.hpp"
#include "placer/cost_model.hpp"
#include "placer/page_stats.hpp"
#include "placer/planner.hpp"
#include "placer/replay.hpp"
#include "runtime/host/host_runtime.hpp"

namespace tierpack::experiment {
namespace {

// --- the policies' allocators ------------------------------------------------------------------

// The baselines give each tensor fresh pages: one mapping per tensor with an mbind policy, unmapped at
// its death, so every page is placed by the policy when the tensor first touches it. (With glibc's
// malloc, pages cached from an earlier run or iteration keep the node they were first touched on,
// which would measure the allocator's history rather than the policy.)
class MappedPlacement final : public Placement {
 public:
  MappedPlacement(NodePolicy policy, std::vector<int> nodes) : policy_(policy), nodes_(std::move(nodes)) {}
  void* allocate(std::size_t bytes) override { return map_with_policy(bytes, policy_, nodes_); }
  void deallocate(void* p, std::size_t bytes) noexcept override { unmap(p, bytes); }

 private:
  NodePolicy policy_;
  std::vector<int> nodes_;
};

class RuntimePlacement final : public Placement {  // tierpack: HostRuntime applying the plan
 public:
  explicit RuntimePlacement(host::HostRuntime& rt) : rt_(rt) {}
  void* allocate(std::size_t bytes) override { return rt_.allocate(bytes); }
  void deallocate(void* p, std::size_t) noexcept override { rt_.deallocate(p); }
  void begin_iteration() override { rt_.begin_iteration(); }
  void end_iteration() override {
    rt_.mover().wait_idle();  // the iteration includes its copies (as the simulator drains them)
    rt_.end_iteration();
    const auto st = rt_.last_iteration();
    stats.push_back(st);
  }
  void op_begin(OpIndex i) override { rt_.on_op_begin(i); }
  void op_end(OpIndex i) override { rt_.on_op_end(i); }
  std::vector<host::IterationStats> stats;

 private:
  host::HostRuntime& rt_;
};

Profile scale_profile(const Profile& p, double scale) {
  if (scale == 1.0) return p;
  Profile s = p;
  for (auto& t : s.tensors) {
    t.bytes = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(static_cast<double>(t.bytes) * scale));
    t.address = static_cast<std::uint64_t>(static_cast<double>(t.address) * scale);
  }
  s.pages.clear();  // page records describe the unscaled layout
  return s;
}

std::uint64_t pages_bytes(std::uint64_t n) { return n * 4096; }

}  // namespace

ExperimentResult run_real_experiment(const Profile& profile_in, const RealOptions& opts) {
  const auto nodes = memory_nodes();
  if (nodes.size() < 2)
    throw logic_error("real mode needs >= 2 NUMA nodes with memory; this machine has " + std::to_string(nodes.size()) +
                      " (use --mode model, or run inside scripts/numa-guest.sh)");
  const int fast_node = nodes[0], slow_node = nodes[1];
  const int device = opts.plan.device;
  const Profile profile = scale_profile(profile_in, opts.scale);
  const ReplayWorkload w = make_replay_workload(profile, device);
  if (w.tensors.empty()) throw logic_error("the profile has no tensors on " + std::string(device < 0 ? "host" : "GPU " + std::to_string(device)));

  ExperimentResult res;
  res.mode = "real";
  res.iterations = opts.iterations;
  res.peak_bytes = w.peak_bytes;
  const bool emulated = std::getenv("TIERPACK_IN_GUEST") != nullptr;
  res.fast_tier = "node " + std::to_string(fast_node);
  res.slow_tier = "node " + std::to_string(slow_node);
  res.tiers = "NUMA nodes " + std::to_string(fast_node) + " (fast) and " + std::to_string(slow_node) + " (slow)" +
              (emulated ? ", emulated QEMU guest" : "");
  if (opts.scale != 1.0) res.notes.push_back("tensor sizes scaled by " + std::to_string(opts.scale) + " (--scale)");
  if (device >= 0) res.notes.push_back("the profile's GPU " + std::to_string(device) + " tensors are replayed in host memory");
  res.notes.push_back("node " + std::to_string(fast_node) + " free before the runs: " + format_bytes(node_free_bytes(fast_node)) +
                      ", low watermark " + format_bytes(node_low_watermark_bytes(fast_node)));
  if (w.peak_bytes * 2 > node_free_bytes(fast_node))
    throw logic_error("the workload's peak (" + format_bytes(w.peak_bytes) + ") does not fit node " + std::to_string(fast_node) +
                      " comfortably (" + format_bytes(node_free_bytes(fast_node)) + " free); use --scale");

  // The runtime's tiers: the model's fast and slow host tiers, on this machine's nodes.
  TierModel model = opts.model;
  const placer::TierChoice choice = placer::choose_tiers(model, -1);
  if (choice.slow == kNoTier) throw logic_error("real mode needs a tier model with two host tiers (e.g. preset:ddr5-cxl)");
  for (auto& t : model.tiers) {
    if (t.id == choice.fast) t.numa_node = fast_node;
    else if (t.id == choice.slow) t.numa_node = slow_node;
    else t.numa_node = -1;
  }

  ReplayRunOptions run;
  run.iterations = std::max(2, opts.iterations);
  run.fast_node = fast_node;
  run.slow_node = slow_node;
  const std::size_t steps = opts.budgets.size() * opts.policies.size();
  std::size_t step = 0;
  auto progress = [&](const std::string& what) {
    if (opts.progress) opts.progress("[real " + std::to_string(++step) + "/" + std::to_string(steps) + "] " + what);
  };
  const KernelFeature tiering = detect_kernel_tiering();
  const KernelFeature damon = detect_damon_migrate();
  res.notes.push_back(std::string("kernel tiering: ") + (tiering.available ? "available (" : "not available (") + tiering.reason + ")");
  res.notes.push_back(std::string("DAMON: ") + (damon.available ? "available (" : "not available (") + damon.reason + ")");

  // The all-fast reference: plain allocations with the fast node's whole free memory (the CPUs are
  // on it, so the default policy puts every page there). A first untimed replay warms up the
  // allocators (and, in an emulator, its code translation cache).
  double reference = 0;
  ReplayRunStats ref_stats;
  {
    if (opts.progress) opts.progress("[real] warm-up replay, then the all-fast reference");
    MappedPlacement warm(NodePolicy::local, {});
    ReplayRunOptions once = run;
    once.iterations = 1;
    once.samples_per_iteration = 1;
    (void)replay_on_nodes(w, warm, once);
    MappedPlacement all_fast(NodePolicy::local, {});
    ref_stats = replay_on_nodes(w, all_fast, run);
    reference = ref_stats.step_ns;
  }
  res.reference_step_ns = reference;
  res.notes.push_back("slowdowns are against the all-fast run of the same budget (re-measured per budget)");
  const std::uint64_t mixed_profile = placer::profile_mixed_class_pages(profile, device);

  for (const BudgetPoint& b : opts.budgets) {
    const std::uint64_t budget = b.budget.resolve(w.peak_bytes);
    for (const std::string& policy : opts.policies) {
      progress("budget " + b.label + " (" + format_bytes(budget) + "): " + policy);
      ResultRow row;
      row.policy = policy;
      row.budget_label = b.label;
      row.budget_bytes = budget;
      row.budget_fraction = w.peak_bytes ? static_cast<double>(budget) / static_cast<double>(w.peak_bytes) : 1.0;
      row.emulated = emulated;
      row.mixed_class_pages = mixed_profile;
      ReplayRunStats st;
      try {
        if (policy == "all-fast") {
          // Re-measured at every budget: an emulated guest on a shared machine drifts, and each
          // budget's slowdowns are against the reference measured next to them.
          if (&b != &opts.budgets.front()) {
            MappedPlacement all_fast(NodePolicy::local, {});
            ref_stats = replay_on_nodes(w, all_fast, run);
            reference = ref_stats.step_ns;
          }
          st = ref_stats;
          row.fits = ref_stats.fast_peak_bytes <= budget;
          row.note = "reference: default policy, node " + std::to_string(fast_node) + " not shrunk (no budget); iterations " +
                     format_duration_ns(ref_stats.min_ns) + " .. " + format_duration_ns(ref_stats.max_ns);
        } else if (policy == "lru-demand") {
          row.available = false;
          row.note = "not available in real mode (a simulator baseline: tensor-granularity demand migration)";
        } else if (policy == "page-agnostic" || policy == "page-aware") {
          placer::PlanOptions po = opts.plan;
          po.device = device;
          po.policy = policy;
          po.fast_budget = Budget{budget, std::nullopt};
          Plan plan = placer::make_plan(profile, model, po);
          row.mixed_class_pages = 0;
          // Sequence positions: the replayer allocates in its own order; renumber the plan to match it.
          std::vector<std::int64_t> seq_of(profile.tensors.size(), -1);
          for (std::size_t i = 0; i < w.in_iteration.size(); ++i) seq_of[w.tensors[w.in_iteration[i]].id] = static_cast<std::int64_t>(i);
          for (auto& pl : plan.placements)
            if (pl.tensor < seq_of.size()) pl.seq = seq_of[pl.tensor];
          host::HostRuntimeOptions ro;
          host::HostRuntime rt(Config{}, model, ro);
          RuntimePlacement placement(rt);
          ReplayRunOptions r = run;
          r.after_setup = [&](const std::vector<void*>& by_id) {
            for (auto& pl : plan.placements)
              if (pl.seq < 0 && pl.tensor < by_id.size() && by_id[pl.tensor]) pl.address = reinterpret_cast<std::uint64_t>(by_id[pl.tensor]);
            rt.set_plan(plan);
            rt.mover().wait_idle();
          };
          st = replay_on_nodes(w, placement, r);
          std::uint64_t to_fast = 0, to_slow = 0, late = 0, fallbacks = 0;
          int n = 0;
          for (std::size_t i = 1; i < placement.stats.size(); ++i, ++n) {
            to_fast += placement.stats[i].moves.bytes_to_fast;
            to_slow += placement.stats[i].moves.bytes_to_slow;
            late += placement.stats[i].moves.moves_late;
            fallbacks += placement.stats[i].fallbacks;
          }
          if (n) row.bytes_to_fast = to_fast / n, row.bytes_to_slow = to_slow / n;
          // Mixed-class pages: the plan's own count (its groups are what the runtime allocates).
          const auto predicted = placer::replay_plan(profile, plan, model);
          row.mixed_class_pages = predicted.mixed_class_pages;
          row.note = rt.plan_summary() + "; per iteration: " + std::to_string(n ? late / n : 0) + " late prefetch(es), " +
                     std::to_string(n ? fallbacks / n : 0) + " budget fallback(s)";
          if (!placement.stats.empty() && !placement.stats.back().divergence.empty())
            row.note += "; diverged: " + placement.stats.back().divergence;
        } else {
          // first-touch, interleave, preferred-fast and the kernel's policies: node 0 shrunk to the budget.
          // The balloon first, on a quiet system: the kernel's tiering would move pages while it is sized.
          if (policy == "kernel-tiering" && !tiering.available) throw logic_error("not available: " + tiering.reason);
          if (policy == "damon" && !damon.available) throw logic_error("not available: " + damon.reason);
          Balloon balloon(fast_node, budget);
          const auto vm0 = read_vmstat();
          std::unique_ptr<KernelTieringSession> kt;
          std::unique_ptr<DamonSession> dm;
          if (policy == "kernel-tiering") kt = std::make_unique<KernelTieringSession>();
          if (policy == "damon") dm = std::make_unique<DamonSession>(fast_node, slow_node);
          const NodePolicy np = policy == "interleave"       ? NodePolicy::interleave
                                : policy == "preferred-fast" ? NodePolicy::preferred
                                                             : NodePolicy::local;  // first-touch, kernel-tiering, damon
          MappedPlacement placement(np, np == NodePolicy::interleave ? std::vector<int>{fast_node, slow_node} : std::vector<int>{fast_node});
          st = replay_on_nodes(w, placement, run);
          const auto vm1 = read_vmstat();
          auto delta = [&](const char* k) {
            auto a = vm0.find(k), z = vm1.find(k);
            return a != vm0.end() && z != vm1.end() && z->second > a->second ? z->second - a->second : 0;
          };
          const int n = run.iterations;
          row.note = "node " + std::to_string(fast_node) + " shrunk by a " + format_bytes(balloon.bytes()) + " mlock'ed balloon; room found " +
                     format_bytes(balloon.room()) +
                     (balloon.converged() ? "" : " (NOT the budget: the balloon did not converge, the row does not hold the budget)");
          if (dm) {
            row.bytes_to_fast = dm->applied_bytes(0) / static_cast<std::uint64_t>(n);
            row.bytes_to_slow = dm->applied_bytes(1) / static_cast<std::uint64_t>(n);
            row.note += "; migrated columns: DAMON's sz_applied (bytes of the regions its schemes acted on); migrate_hot: " + dm->stats(0) + "; migrate_cold: " + dm->stats(1) + "; pgmigrate_success " +
                        format_bytes(pages_bytes(delta("pgmigrate_success")) / static_cast<std::uint64_t>(n)) + "/iteration";
          } else {
            row.bytes_to_fast = pages_bytes(delta("pgpromote_success")) / static_cast<std::uint64_t>(n);
            row.bytes_to_slow = pages_bytes(delta("pgdemote_kswapd") + delta("pgdemote_direct") + delta("pgdemote_khugepaged")) /
                                static_cast<std::uint64_t>(n);
            if (const auto m = delta("pgmigrate_success")) row.note += "; pgmigrate_success " + format_bytes(pages_bytes(m) / static_cast<std::uint64_t>(n)) + "/iteration";
          }
        }
      } catch (const logic_error& e) {
        row.available = false;
        row.note = e.what();
      } catch (const error& e) {
        row.available = false;
        row.note = std::string("failed: ") + e.what();
      }
      if (row.available) {
        row.step_ns = st.step_ns;
        row.slowdown = reference > 0 ? st.step_ns / reference : 0;
        row.fast_peak_bytes = st.fast_peak_bytes;
        if (policy != "all-fast")
          row.note += "; iterations " + format_duration_ns(st.min_ns) + " .. " + format_duration_ns(st.max_ns);
        row.slow_peak_bytes = st.slow_peak_bytes;
      }
      res.rows.push_back(row);
    }
  }
  return res;
}

}  // namespace tierpack::experiment
