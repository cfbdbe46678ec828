// Synthetic training-iteration profiles (see synthetic_profile.hpp).
//
// One iteration of an L-layer network, each layer shaped like a transformer MLP block:
//   forward  layer_norm(x) -> n, stats;  linear(n, W, b) -> h;  gelu(h) -> u (temporary);  add(u, h) -> x'
//   backward gelu_backward -> gh;  linear_backward -> gn, accumulates gW, gb;  layer_norm_backward -> g
//   optimizer one fused AdamW op per parameter
// Saved activations (x, n, stats, h) live from their forward op to the layer's backward; parameters,
// gradients and optimizer state live across iterations; an attention-mask-like buffer lives through
// the forward pass. Addresses come from a first-fit allocator, so allocation order interleaves classes
// the way a caching allocator does.
#include "tests/support/synthetic_profile.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.hpp"

namespace tierpack::synth {
namespace {

// splitmix64: identical sequences on every platform (std distributions are not).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return uniform(0, 1) < p; }

 private:
  std::uint64_t state_;
};

std::uint64_t round_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

// First-fit address allocator with 512-byte granularity (like a caching allocator's small pool).
class AddressSpace {
 public:
  explicit AddressSpace(std::uint64_t base) : top_(base) {}
  std::uint64_t alloc(std::uint64_t bytes) {
    bytes = round_up(std::max<std::uint64_t>(bytes, 1), 512);
    for (auto it = holes_.begin(); it != holes_.end(); ++it) {
      if (it->second < bytes) continue;
      const std::uint64_t addr = it->first, size = it->second;
      holes_.erase(it);
      if (size > bytes) holes_[addr + bytes] = size - bytes;
      return addr;
    }
    const std::uint64_t addr = top_;
    top_ += bytes;
    return addr;
  }
  void free(std::uint64_t addr, std::uint64_t bytes) {
    bytes = round_up(std::max<std::uint64_t>(bytes, 1), 512);
    auto [it, ok] = holes_.emplace(addr, bytes);
    if (auto next = std::next(it); next != holes_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      holes_.erase(next);
    }
    if (it != holes_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        holes_.erase(it);
        it = prev;
      }
    }
    if (it->first + it->second == top_) {
      top_ = it->first;
      holes_.erase(it);
    }
  }

 private:
  std::uint64_t top_;
  std::map<std::uint64_t, std::uint64_t> holes_;
};

class Builder {
 public:
  Builder(const SyntheticOptions& o, Rng& rng) : o_(o), rng_(rng), space_(0x7f0000000000ull) {
    bytes_per_ns_ = o.bytes_per_ns > 0 ? o.bytes_per_ns : (o.device >= 0 ? 3000.0 : 100.0);
    launch_ns_ = o.launch_ns > 0 ? o.launch_ns : (o.device >= 0 ? 3000.0 : 500.0);
    gap_ns_ = o.device >= 0 ? 200 : 100;
  }

  TensorId persistent(std::uint64_t bytes, std::uint32_t flags) {
    TensorRecord t = base(bytes, flags);
    t.seq = -1;
    t.birth_op = kBeforeIteration;
    t.death_op = kAfterIteration;
    t.address = space_.alloc(bytes);
    p_.tensors.push_back(t);
    return t.id;
  }

  /// A tensor allocated by the next op.
  TensorId alloc(std::uint64_t bytes, std::uint32_t flags = 0) {
    TensorRecord t = base(bytes, flags);
    t.seq = seq_++;
    t.birth_op = static_cast<OpIndex>(p_.ops.size());
    t.address = space_.alloc(bytes);
    p_.tensors.push_back(t);
    return t.id;
  }

  /// Frees a tensor after the op that ran last.
  void free(TensorId id) {
    auto& t = p_.tensors[id];
    t.death_op = static_cast<OpIndex>(p_.ops.size()) - 1;
    t.death_ns = p_.ops.back().end_ns;
    space_.free(t.address, t.bytes);
  }

  OpIndex op(const std::string& name, Phase phase, std::vector<TensorId> in, std::vector<TensorId> out, double work = 1) {
    OpRecord r;
    r.index = static_cast<OpIndex>(p_.ops.size());
    r.name = name;
    r.phase = phase;
    std::uint64_t bytes = 0;
    std::vector<TensorId> all = in;
    all.insert(all.end(), out.begin(), out.end());
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    for (auto t : all) bytes += p_.tensors[t].bytes;
    const double dur = (launch_ns_ + static_cast<double>(bytes) / bytes_per_ns_ * work) * rng_.uniform(0.9, 1.1);
    r.begin_ns = now_;
    r.end_ns = now_ + static_cast<std::uint64_t>(dur);
    now_ = r.end_ns + gap_ns_;
    r.inputs.assign(in.begin(), in.end());
    r.outputs.assign(out.begin(), out.end());
    for (auto t : all) {
      auto& rec = p_.tensors[t];
      rec.uses.push_back(r.index);
      rec.page_touches += rec.pages;
      if (rec.seq >= 0 && rec.birth_op == r.index) {
        rec.birth_ns = r.begin_ns;
        rec.alloc_op = name;
      }
    }
    p_.ops.push_back(std::move(r));
    return p_.ops.back().index;
  }

  std::uint64_t small() { return round_up(static_cast<std::uint64_t>(rng_.uniform(256, double(o_.small_max_bytes))), 256); }

  Profile finish() {
    p_.iteration_ns = now_;
    std::uint64_t sig = 0xcbf29ce484222325ull;
    std::uint32_t allocations = 0;
    for (auto& t : p_.tensors) {
      if (o_.hidden_access_fraction > 0 && rng_.chance(o_.hidden_access_fraction)) t.flags |= kTensorHiddenAccess;
      t.pages_touched = t.uses.empty() ? 0 : t.pages;
      if (t.seq < 0) continue;
      ++allocations;
      for (char c : std::to_string(t.bytes) + "/" + t.alloc_op + ";") sig = (sig ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    }
    IterationInfo info;
    info.index = 1;
    info.duration_ns = p_.iteration_ns;
    info.allocations = allocations;
    info.signature = sig;
    p_.iterations = {info};
    p_.meta.profiled_iteration = 1;
    p_.meta.iterations_observed = 1;
    return std::move(p_);
  }

  Profile& profile() { return p_; }

 private:
  TensorRecord base(std::uint64_t bytes, std::uint32_t flags) {
    TensorRecord t;
    t.id = static_cast<TensorId>(p_.tensors.size());
    t.bytes = bytes;
    t.device = o_.device;
    t.flags = flags;
    t.pages = static_cast<std::uint32_t>(round_up(bytes, 4096) / 4096);
    t.tier = 0;
    return t;
  }

  const SyntheticOptions& o_;
  Rng& rng_;
  AddressSpace space_;
  Profile p_;
  std::int64_t seq_ = 0;
  std::uint64_t now_ = 0;
  double bytes_per_ns_ = 1, launch_ns_ = 0;
  std::uint64_t gap_ns_ = 0;
};

struct Layer {
  TensorId w, b, gw, gb, mw = 0, vw = 0, mb = 0, vb = 0;
  std::uint64_t act = 0;
  TensorId x = 0, n = 0, stats = 0, h = 0;
};

}  // namespace

Profile make_synthetic_profile(const SyntheticOptions& o) {
  TIERPACK_EXPECTS(o.tensors > 0, "a synthetic profile needs at least one tensor");
  Rng rng(o.seed);
  Builder b(o, rng);
  Profile& p = b.profile();
  p.meta.tool_version = "synthetic";
  p.meta.framework = "synthetic";
  p.meta.command = "synthetic --tensors " + std::to_string(o.tensors) + " --seed " + std::to_string(o.seed);
  p.meta.page_tracer = "none";
  p.meta.iteration_source = "explicit";
  if (o.device >= 0) {
    Tier gpu;
    gpu.kind = TierKind::gpu;
    gpu.name = "gpu" + std::to_string(o.device);
    gpu.device = o.device;
    gpu.capacity_bytes = 80ull << 30;
    gpu.page_size = 2ull << 20;
    gpu.source = "synthetic";
    p.topology.add(gpu);
  }
  Tier host;
  host.kind = TierKind::host_dram;
  host.name = "dram0";
  host.numa_node = 0;
  host.capacity_bytes = 256ull << 30;
  host.source = "synthetic";
  p.topology.add(host);
  p.topology.hostname = "synthetic";

  const std::uint32_t layers_n = std::max<std::uint32_t>(1, o.tensors / 17);
  auto scaled = [&](std::uint64_t v, double f) { return round_up(static_cast<std::uint64_t>(double(v) * f), 512); };
  std::vector<Layer> layers(layers_n);
  // Parameters first (model construction), then gradients, then optimizer state: their address order.
  for (auto& l : layers) {
    const double f = rng.uniform(0.5, 1.5);
    l.act = scaled(o.activation_bytes, f);
    l.w = b.persistent(scaled(o.param_bytes, f), kTensorParameter);
    l.b = b.persistent(b.small(), kTensorParameter);
  }
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    it->gw = b.persistent(p.tensors[it->w].bytes, kTensorGradient);
    it->gb = b.persistent(p.tensors[it->b].bytes, kTensorGradient);
  }
  if (o.optimizer_state)
    for (auto& l : layers) {
      l.mw = b.persistent(p.tensors[l.w].bytes, kTensorOptimizerState);
      l.vw = b.persistent(p.tensors[l.w].bytes, kTensorOptimizerState);
      l.mb = b.persistent(p.tensors[l.b].bytes, kTensorOptimizerState);
      l.vb = b.persistent(p.tensors[l.b].bytes, kTensorOptimizerState);
    }

  // ---- forward ----
  const TensorId mask = b.alloc(b.small());
  const TensorId input = b.alloc(layers.front().act, kTensorSavedForBackward);
  b.op("aten::to", Phase::forward, {}, {mask, input});
  TensorId x = input;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    auto& l = layers[i];
    l.x = x;
    l.n = b.alloc(l.act, kTensorSavedForBackward);
    l.stats = b.alloc(b.small(), kTensorSavedForBackward);
    b.op("aten::layer_norm", Phase::forward, {x, l.b}, {l.n, l.stats});
    l.h = b.alloc(l.act, kTensorSavedForBackward);
    b.op("aten::linear", Phase::forward, {l.n, l.w, l.b, mask}, {l.h}, o.matmul_work);
    const TensorId u = b.alloc(l.act / 2);
    b.op("aten::gelu", Phase::forward, {l.h}, {u});
    if (rng.chance(0.5)) {
      const TensorId scratch = b.alloc(b.small());
      b.op("aten::zeros", Phase::forward, {}, {scratch});
      b.free(scratch);
    }
    const std::uint64_t next_act = i + 1 < layers.size() ? layers[i + 1].act : l.act;
    const TensorId out = b.alloc(next_act, kTensorSavedForBackward);
    b.op("aten::add", Phase::forward, {u, l.h}, {out});
    b.free(u);
    x = out;
  }
  b.free(mask);
  const TensorId loss = b.alloc(512);
  b.op("aten::cross_entropy", Phase::forward, {x}, {loss});

  // ---- backward ----
  TensorId g = b.alloc(p.tensors[x].bytes);
  b.op("aten::cross_entropy_backward", Phase::backward, {loss, x}, {g});
  b.free(loss);
  b.free(x);
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    auto& l = *it;
    const TensorId gh = b.alloc(l.act);
    b.op("GeluBackward0", Phase::backward, {g, l.h}, {gh});
    b.free(g);
    const TensorId gn = b.alloc(l.act);
    b.op("AddmmBackward0", Phase::backward, {gh, l.n, l.w, l.gw, l.gb}, {gn, l.gw, l.gb}, 2 * o.matmul_work);
    b.free(gh);
    b.free(l.h);
    if (rng.chance(0.5)) {
      const TensorId scratch = b.alloc(b.small());
      b.op("aten::empty", Phase::backward, {}, {scratch});
      b.free(scratch);
    }
    const TensorId gx = b.alloc(p.tensors[l.x].bytes);
    b.op("NativeLayerNormBackward0", Phase::backward, {gn, l.x, l.stats, l.b}, {gx});
    b.free(gn);
    b.free(l.n);
    b.free(l.stats);
    b.free(l.x);
    g = gx;
  }
  b.free(g);

  // ---- optimizer ----
  for (auto& l : layers) {
    if (o.optimizer_state) {
      b.op("aten::_fused_adamw_", Phase::optimizer, {l.w, l.gw, l.mw, l.vw}, {l.w, l.mw, l.vw});
      b.op("aten::_fused_adamw_", Phase::optimizer, {l.b, l.gb, l.mb, l.vb}, {l.b, l.mb, l.vb});
    } else {
      b.op("aten::add_", Phase::optimizer, {l.w, l.gw}, {l.w});
      b.op("aten::add_", Phase::optimizer, {l.b, l.gb}, {l.b});
    }
  }
  Profile out = b.finish();
  out.validate();
  return out;
}

Profile make_random_profile(const RandomProfileOptions& o) {
  Rng rng(o.seed);
  Profile p;
  p.meta.framework = "synthetic";
  p.meta.command = "random --seed " + std::to_string(o.seed);
  Tier fast;
  fast.kind = o.device >= 0 ? TierKind::gpu : TierKind::host_dram;
  fast.name = o.device >= 0 ? "gpu0" : "dram0";
  fast.device = o.device >= 0 ? o.device : -1;
  fast.capacity_bytes = 80ull << 30;
  fast.page_size = o.device >= 0 ? (2ull << 20) : 4096;
  p.topology.add(fast);
  auto pick = [&](std::uint64_t lo, std::uint64_t hi) {  // uniform in [lo, hi]
    return lo + static_cast<std::uint64_t>(rng.uniform(0, 1) * double(hi - lo + 1)) % (hi - lo + 1);
  };
  const auto n_ops = static_cast<OpIndex>(pick(1, std::max<std::uint32_t>(o.max_ops, 1)));
  std::uint64_t now = 0;
  for (OpIndex i = 0; i < n_ops; ++i) {
    OpRecord op;
    op.index = i;
    op.name = "op" + std::to_string(i);
    op.phase = static_cast<Phase>(i * 3 / n_ops + 1);
    if (rng.chance(0.1)) op.phase = Phase::unknown;
    now += pick(0, 2000);
    op.begin_ns = now;
    now += pick(100, 200000);
    op.end_ns = now;
    p.ops.push_back(op);
  }
  // A few scope ops enclose the ops after them (like Optimizer.step around its kernels).
  for (OpIndex i = 0; i + 1 < n_ops; ++i) {
    if (!rng.chance(0.08)) continue;
    const OpIndex last = std::min<OpIndex>(n_ops - 1, i + static_cast<OpIndex>(pick(1, 3)));
    p.ops[static_cast<std::size_t>(i)].end_ns = std::max(p.ops[static_cast<std::size_t>(i)].end_ns, p.ops[static_cast<std::size_t>(last)].end_ns);
    for (OpIndex k = i + 1; k <= last; ++k)
      if (p.ops[static_cast<std::size_t>(k)].parent < 0) p.ops[static_cast<std::size_t>(k)].parent = i;
    i = last;
  }
  p.iteration_ns = now + pick(0, 5000);
  const auto n_tensors = static_cast<std::uint32_t>(pick(1, std::max<std::uint32_t>(o.max_tensors, 1)));
  std::int64_t seq = 0;
  std::uint64_t address = 0x10000000;
  for (std::uint32_t id = 0; id < n_tensors; ++id) {
    TensorRecord t;
    t.id = id;
    t.device = rng.chance(0.05) ? (o.device >= 0 ? -1 : 1) : o.device;
    const double log_bytes = rng.uniform(0, std::log2(double(std::max<std::uint64_t>(o.max_tensor_bytes, 2))));
    t.bytes = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::exp2(log_bytes)));
    const int kind = static_cast<int>(pick(0, 3));
    const bool before = kind == 0 || kind == 1, after = kind == 0 || kind == 2;
    t.birth_op = before ? kBeforeIteration : static_cast<OpIndex>(pick(0, std::uint64_t(n_ops - 1)));
    const OpIndex lo = before ? 0 : t.birth_op;
    t.death_op = after ? kAfterIteration : static_cast<OpIndex>(pick(std::uint64_t(lo), std::uint64_t(n_ops - 1)));
    const OpIndex hi = after ? n_ops - 1 : t.death_op;
    t.seq = before ? -1 : seq++;
    t.address = address;
    address += (t.bytes + 4095) / 4096 * 4096 + (rng.chance(0.5) ? 0 : 4096);
    const auto n_uses = pick(0, 6);
    for (std::uint64_t k = 0; k < n_uses; ++k) t.uses.push_back(static_cast<OpIndex>(pick(std::uint64_t(lo), std::uint64_t(hi))));
    if (!before) t.uses.push_back(t.birth_op);
    std::sort(t.uses.begin(), t.uses.end());
    t.uses.erase(std::unique(t.uses.begin(), t.uses.end()), t.uses.end());
    if (rng.chance(0.05)) t.flags |= kTensorHiddenAccess;
    if (rng.chance(0.2)) t.flags |= kTensorSavedForBackward;
    if (before && after && rng.chance(0.5)) t.flags |= kTensorParameter;
    t.alloc_op = before ? "" : p.ops[static_cast<std::size_t>(t.birth_op)].name;
    for (auto u : t.uses) {
      auto& op = p.ops[static_cast<std::size_t>(u)];
      (u == t.birth_op ? op.outputs : op.inputs).push_back(id);
    }
    p.tensors.push_back(t);
  }
  p.validate();
  return p;
}

void write_synthetic_profile(const SyntheticOptions& opts, const std::string& path) {
  write_profile(make_synthetic_profile(opts), path);
}

}  // namespace tierpack::synth
