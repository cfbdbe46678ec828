// Report test inputs (see report_fixtures.hpp).
#include "tests/report/report_fixtures.hpp"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <unistd.h>

#include "placer/planner.hpp"

namespace tierpack::report::testing {
namespace {

constexpr std::uint64_t kHostPage = 4096;
constexpr double kBandwidth = 55e9;

std::uint64_t round_up(std::uint64_t v, std::uint64_t to) { return (v + to - 1) / to * to; }

class Builder {
 public:

  OpIndex op(const std::string& name, Phase phase, std::uint64_t bytes, std::int32_t parent = -1) {
    OpRecord r;
    r.index = static_cast<OpIndex>(p.ops.size());
    r.name = name;
    r.phase = phase;
    r.parent = parent;
    r.thread = phase == Phase::backward ? 1 : 0;  // autograd runs backward on its own thread
    r.begin_ns = now_;
    // Bytes touched at ~500 bytes/ns plus a launch cost: an iteration of a few milliseconds.
    r.end_ns = now_ + 2000 + bytes / 500;
    now_ = r.end_ns + 300;
    p.ops.push_back(r);
    return r.index;
  }
  /// A scope op that encloses the ops added until close(scope).
  OpIndex open(const std::string& name, Phase phase) {
    const OpIndex k = op(name, phase, 0);
    now_ = p.ops[static_cast<std::size_t>(k)].begin_ns + 100;
    return k;
  }
  void close(OpIndex scope) {
    auto& r = p.ops[static_cast<std::size_t>(scope)];
    r.end_ns = std::max(r.end_ns, p.ops.back().end_ns);
    now_ = r.end_ns + 300;
  }

  TensorId tensor(std::uint64_t bytes, int device, OpIndex birth, std::uint32_t flags = 0) {
    TensorRecord t;
    t.id = static_cast<TensorId>(p.tensors.size());
    t.bytes = bytes;
    t.device = device;
    t.birth_op = birth;
    t.seq = birth == kBeforeIteration ? -1 : next_seq_[device]++;
    t.flags = flags;
    if (birth >= 0) t.alloc_op = p.ops[static_cast<std::size_t>(birth)].name;
    p.tensors.push_back(t);
    if (birth >= 0) use(t.id, birth, true);
    return t.id;
  }
  void use(TensorId t, OpIndex op, bool output) {
    auto& uses = p.tensors[t].uses;
    if (uses.empty() || uses.back() != op) uses.push_back(op);
    auto& r = p.ops[static_cast<std::size_t>(op)];
    (output ? r.outputs : r.inputs).push_back(t);
  }
  void kill(TensorId t, OpIndex op) { p.tensors[t].death_op = op; }
  OpIndex last_op() const { return static_cast<OpIndex>(p.ops.size()) - 1; }
  std::uint64_t now() const { return now_; }

  Profile p;

 private:
  std::uint64_t now_ = 1000;
  std::map<int, std::int64_t> next_seq_;
};

// First-fit addresses in allocation order, reusing freed ranges (like a caching allocator).
// `hole` bytes are left free after each tensor that outlives the iteration, so later short-lived
// tensors land between long-lived ones (host allocators interleave them like this).
void assign_addresses(Profile& p, int device, std::uint64_t base, std::uint64_t align, std::uint64_t hole = 0) {
  struct Ev {
    std::int64_t when;
    int kind;  // 0 free, 1 alloc
    TensorId t;
  };
  std::vector<Ev> ev;
  for (const auto& t : p.tensors) {
    if (t.device != device) continue;
    ev.push_back({t.birth_op + 1, 1, t.id});
    if (t.death_op != kAfterIteration) ev.push_back({t.death_op + 2, 0, t.id});
  }
  std::sort(ev.begin(), ev.end(), [](const Ev& a, const Ev& b) {
    return a.when != b.when ? a.when < b.when : a.kind != b.kind ? a.kind < b.kind : a.t < b.t;
  });
  std::map<std::uint64_t, std::uint64_t> free_ranges;  // offset -> size
  std::uint64_t top = 0;
  int holes = 0;
  for (const auto& e : ev) {
    auto& t = p.tensors[e.t];
    const std::uint64_t size = round_up(std::max<std::uint64_t>(t.bytes, 1), align);
    if (e.kind == 0) {
      std::uint64_t off = t.address - base, sz = size;
      auto next = free_ranges.find(off + sz);
      if (next != free_ranges.end()) sz += next->second, free_ranges.erase(next);
      auto prev = free_ranges.lower_bound(off);
      if (prev != free_ranges.begin() && (--prev)->first + prev->second == off) {
        off = prev->first, sz += prev->second;
        free_ranges.erase(prev);
      }
      free_ranges[off] = sz;
      continue;
    }
    std::uint64_t off = top;
    bool found = false;
    for (auto it = free_ranges.begin(); it != free_ranges.end(); ++it) {
      if (it->second < size) continue;
      off = it->first;
      const auto rest = it->second - size;
      free_ranges.erase(it);
      if (rest) free_ranges[off + size] = rest;
      found = true;
      break;
    }
    if (!found) {
      top += size;
      if (hole && t.birth_op == kBeforeIteration && holes++ < 64) free_ranges[top] = hole, top += hole;
    }
    t.address = base + off;
  }
}

}  // namespace

Profile make_training_profile(const FixtureOptions& o) {
  Builder b;
  Profile& p = b.p;
  p.meta.id = "report-fixture-" + std::to_string(o.layers);  // as the profiler gives every profile (Note [Profile identity])
  p.meta.tool_version = "test";
  p.meta.command = "python train.py --layers " + std::to_string(o.layers);
  p.meta.framework = "synthetic";
  p.meta.page_tracer = o.page_data ? "uffd-wp" : "none";
  p.meta.created_unix = 1764400000;
  p.meta.iteration_source = "optimizer-step";
  p.topology.hostname = "fixture";
  const bool gpu = o.device >= 0;
  TierId fast = 0, host = 0;
  if (gpu) {
    Tier g;
    g.kind = TierKind::gpu;
    g.name = "gpu" + std::to_string(o.device);
    g.device = o.device;
    g.capacity_bytes = 141ull << 30;
    g.page_size = 2ull << 20;
    fast = p.topology.add(g);
  }
  Tier d;
  d.kind = TierKind::host_dram;
  d.name = "dram0";
  d.numa_node = 0;
  d.capacity_bytes = 512ull << 30;
  host = p.topology.add(d);
  if (!gpu) fast = host;
  if (gpu) {
    p.topology.links.push_back({fast, host, kBandwidth, true, "fixture"});
    p.topology.links.push_back({host, fast, kBandwidth, true, "fixture"});
  }
  const int dev = o.device;

  const int L = o.layers;
  std::vector<TensorId> params, grads, acts, small_persistent;
  for (int i = 0; i < L; ++i) {
    params.push_back(b.tensor(o.param_bytes, dev, kBeforeIteration, kTensorParameter));
    b.kill(params.back(), kAfterIteration);
  }
  std::vector<TensorId> states;
  for (int i = 0; i < L; ++i)
    for (int k = 0; k < 2; ++k) {
      states.push_back(b.tensor(o.param_bytes, dev, kBeforeIteration, kTensorOptimizerState));
      b.kill(states.back(), kAfterIteration);
    }
  // Host side: small persistent buffers (e.g. loss scaler state, dataloader pinned staging) that
  // share pages with short-lived host temporaries: the false sharing the page map must show.
  for (int i = 0; i < L * o.small_host_tensors_per_layer / 2; ++i) {
    small_persistent.push_back(b.tensor(1536 + 512 * static_cast<std::uint64_t>(i % 3), -1, kBeforeIteration));
    b.kill(small_persistent.back(), kAfterIteration);
  }

  // Forward.
  TensorId x = b.tensor(o.activation_bytes / 4, dev, b.op("aten::to", Phase::forward, o.activation_bytes / 4));
  b.p.tensors[x].flags |= kTensorSavedForBackward;
  std::vector<OpIndex> fwd_ops;
  for (int i = 0; i < L; ++i) {
    const OpIndex norm = b.op("aten::layer_norm", Phase::forward, o.activation_bytes);
    const TensorId t1 = b.tensor(o.activation_bytes / 2, dev, norm);
    b.use(i == 0 ? x : acts.back(), norm, false);
    const OpIndex lin = b.op("aten::linear", Phase::forward, o.activation_bytes + o.param_bytes);
    b.use(t1, lin, false);
    b.use(params[static_cast<std::size_t>(i)], lin, false);
    b.kill(t1, lin);
    acts.push_back(b.tensor(o.activation_bytes, dev, lin, kTensorSavedForBackward));
    fwd_ops.push_back(lin);
    TensorId prev = acts.back();
    for (int k = 0; k < o.temporaries_per_layer; ++k) {
      const OpIndex g = b.op(k % 2 ? "aten::add" : "aten::gelu", Phase::forward, o.activation_bytes / 4);
      b.use(prev, g, false);
      const TensorId tmp = b.tensor(o.activation_bytes / 4, dev, g);
      if (prev != acts.back()) b.kill(prev, g);
      prev = tmp;
    }
    if (prev != acts.back()) b.kill(prev, b.last_op());
    for (int k = 0; k < o.small_host_tensors_per_layer / 2; ++k) {
      const OpIndex h = b.op("aten::copy_", Phase::forward, 4096);
      const TensorId s = b.tensor(1024 + 256 * static_cast<std::uint64_t>(k), -1, h);
      b.use(small_persistent[static_cast<std::size_t>((i + k) % static_cast<int>(small_persistent.size()))], h, false);
      b.kill(s, h);
    }
  }
  const OpIndex loss_op = b.op("aten::cross_entropy", Phase::forward, o.activation_bytes / 4);
  b.use(acts.back(), loss_op, false);
  const TensorId loss = b.tensor(4096, dev, loss_op);

  // Backward (reverse layer order); gradients are allocated on first backward use and kept.
  const OpIndex first_bwd = b.op("autograd::engine::evaluate_function: NllLossBackward0", Phase::backward, 4096);
  b.use(loss, first_bwd, false);
  const TensorId bucket = b.tensor(o.param_bytes, dev, first_bwd);  // iteration-scoped grad bucket
  grads.assign(static_cast<std::size_t>(L), 0);
  for (int i = L - 1; i >= 0; --i) {
    const OpIndex mm = b.op("aten::mm", Phase::backward, 2 * o.activation_bytes);
    b.use(acts[static_cast<std::size_t>(i)], mm, false);
    b.use(params[static_cast<std::size_t>(i)], mm, false);
    const TensorId gin = b.tensor(o.activation_bytes / 2, dev, mm);
    b.kill(acts[static_cast<std::size_t>(i)], mm);
    grads[static_cast<std::size_t>(i)] = b.tensor(o.param_bytes, dev, mm, kTensorGradient);
    b.kill(grads[static_cast<std::size_t>(i)], kAfterIteration);
    const OpIndex acc = b.op("aten::add_", Phase::backward, o.param_bytes);
    b.use(gin, acc, false);
    b.use(bucket, acc, true);
    b.kill(gin, acc);
  }
  b.kill(x, b.op("aten::mm", Phase::backward, o.activation_bytes));
  b.use(x, b.last_op(), false);
  b.kill(loss, b.last_op());

  // Optimizer step: one scope with one update per parameter.
  const OpIndex step = b.open("Optimizer.step#AdamW.step", Phase::optimizer);
  for (int i = 0; i < L; ++i) {
    const OpIndex up = b.op("aten::_foreach_addcmul_", Phase::optimizer, 4 * o.param_bytes, step);
    b.use(grads[static_cast<std::size_t>(i)], up, false);
    b.use(params[static_cast<std::size_t>(i)], up, true);
    b.use(states[static_cast<std::size_t>(2 * i)], up, true);
    b.use(states[static_cast<std::size_t>(2 * i + 1)], up, true);
    b.use(bucket, up, false);
  }
  b.close(step);
  b.kill(bucket, b.last_op());
  p.iteration_ns = b.now() + 500;
  for (auto& t : p.tensors) std::sort(t.uses.begin(), t.uses.end()), t.uses.erase(std::unique(t.uses.begin(), t.uses.end()), t.uses.end());

  // Tiers, times and addresses.
  for (auto& t : p.tensors) {
    t.tier = t.device >= 0 ? fast : host;
    t.birth_ns = t.birth_op < 0 ? 0 : p.ops[static_cast<std::size_t>(t.birth_op)].begin_ns;
    t.death_ns = t.death_op == kAfterIteration ? p.iteration_ns : p.ops[static_cast<std::size_t>(t.death_op)].end_ns;
    t.pages = static_cast<std::uint32_t>(round_up(t.bytes, kHostPage) / kHostPage);
  }
  if (o.addresses) {
    if (gpu) assign_addresses(p, dev, 0x7f5a00000000ull, 512);
    assign_addresses(p, -1, 0x55d000000000ull, 64, 1536);
  }

  // Host page records: pages holding tensors of different lifetimes (persistent vs. short-lived).
  if (o.page_data && o.addresses) {
    std::map<std::uint64_t, std::vector<TensorId>> on_page;
    for (const auto& t : p.tensors) {
      if (t.device != -1) continue;
      for (auto pg = t.address / kHostPage; pg <= (t.address + t.bytes - 1) / kHostPage; ++pg) on_page[pg].push_back(t.id);
    }
    std::size_t n = 0;
    for (const auto& [pg, ids] : on_page) {
      std::set<bool> kinds;
      for (auto id : ids) kinds.insert(p.tensors[id].birth_op == kBeforeIteration);
      const bool shared = kinds.size() > 1;
      const bool hidden = n % 3 == 1;
      if (!shared && !hidden) {
        ++n;
        continue;
      }
      PageRecord r;
      r.address = pg * kHostPage;
      r.numa_node = 0;
      r.tensors = ids;
      r.touch_windows = static_cast<std::uint32_t>(2 + ids.size());
      r.hidden_windows = hidden ? 2 : 0;
      r.written = n % 2 == 0;
      r.false_shared = shared;
      for (auto id : ids) {
        if (shared) p.tensors[id].flags |= kTensorFalseShared;
        if (hidden) p.tensors[id].flags |= kTensorHiddenAccess;
        p.tensors[id].pages_touched = p.tensors[id].pages;
      }
      p.pages.push_back(r);
      ++n;
    }
  }

  // Observed iterations: all alike, except one that allocates differently.
  const std::uint64_t sig = 0x5eed0000ull + static_cast<std::uint64_t>(L);
  std::uint32_t allocations = 0;
  for (const auto& t : p.tensors) allocations += t.birth_op >= 0 ? 1 : 0;
  for (int i = 0; i < o.iterations; ++i) {
    const bool differs = o.iterations > 3 && i == o.iterations - 2;
    p.iterations.push_back({i, p.iteration_ns + static_cast<std::uint64_t>(i) * 1000, allocations + (differs ? 1u : 0u),
                            differs ? sig ^ 0xff : sig, !differs});
    if (differs) p.divergences.push_back({i, 17, "size 4096 != 8192 at seq 17 (aten::cross_entropy)"});
  }
  p.meta.iterations_observed = o.iterations;
  p.meta.profiled_iteration = std::min(2, o.iterations - 1);
  p.validate();
  return p;
}

Plan make_plan(const Profile& profile, std::uint64_t budget_bytes) {
  placer::PlanOptions opts;
  opts.device = placer::main_device(profile);
  opts.fast_budget.bytes = budget_bytes;
  return placer::make_plan(profile, profile.topology, opts);
}

RunStats make_run_stats(const Profile& profile, const Plan& plan) {
  RunStats s;
  s.source = "fixture run";
  s.profile_id = plan.profile_id;
  s.fast_budget_bytes = plan.fast_budget_bytes;
  s.sampled_iteration = 4;
  for (int i = 0; i < 3; ++i)
    s.iterations.push_back({3 + i, profile.iteration_ns + 40000, plan.prediction.bytes_to_fast, plan.prediction.bytes_to_slow,
                            1, 30000, 0, 0});
  // Occupancy: the profile's live bytes on the plan's device, minus evicted groups, at op starts.
  std::vector<std::pair<double, std::int64_t>> slow_delta;
  for (const auto& mv : plan.schedule) {
    const double t = mv.kind == MoveKind::evict ? mv.predicted_end_ns * 1.02 : mv.predicted_start_ns;
    slow_delta.push_back({t, mv.kind == MoveKind::evict ? static_cast<std::int64_t>(mv.bytes) : -static_cast<std::int64_t>(mv.bytes)});
    s.moves.push_back({mv.group, mv.kind, mv.from, mv.to, mv.bytes, static_cast<std::uint64_t>(mv.predicted_start_ns * 1.02),
                       static_cast<std::uint64_t>(mv.predicted_end_ns * 1.02)});
  }
  // One sweep over op steps for the live bytes, one walk over the moves for the evicted bytes.
  std::vector<std::int64_t> delta(profile.ops.size() + 2, 0);
  for (const auto& t : profile.tensors) {
    if (t.device != plan.device) continue;
    delta[static_cast<std::size_t>(std::max<OpIndex>(t.birth_op, 0))] += static_cast<std::int64_t>(t.bytes);
    if (t.death_op != kAfterIteration) delta[static_cast<std::size_t>(t.death_op) + 1] -= static_cast<std::int64_t>(t.bytes);
  }
  std::sort(slow_delta.begin(), slow_delta.end());
  std::int64_t live = 0, slow = 0;
  std::size_t next = 0;
  for (const auto& op : profile.ops) {
    live += delta[static_cast<std::size_t>(op.index)];
    for (; next < slow_delta.size() && slow_delta[next].first <= static_cast<double>(op.begin_ns); ++next) slow += slow_delta[next].second;
    s.occupancy.push_back({op.begin_ns, plan.fast_tier, static_cast<std::uint64_t>(std::max<std::int64_t>(live - slow, 0))});
    s.occupancy.push_back({op.begin_ns, plan.slow_tier, static_cast<std::uint64_t>(std::max<std::int64_t>(slow, 0))});
  }
  for (const auto& op : profile.ops)
    if (op.phase == Phase::backward && op.name == "aten::mm") {
      s.stalls.push_back({op.index, 2, op.begin_ns, 30000});
      break;
    }
  s.validate();
  return s;
}

std::string scratch_dir(const std::string& name) {
  static std::atomic<int> counter{0};
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tierpack_report_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace tierpack::report::testing
