// The real-nodes replayer (see host_replayer.hpp).
#include "experiment/host_replayer.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "core/error.hpp"
#include "experiment/node_policy.hpp"
#include "placer/timeline.hpp"

namespace tierpack::experiment {

ReplayWorkload make_replay_workload(const Profile& p, int device) {
  ReplayWorkload w;
  const placer::Timeline tl(p);
  const auto n = static_cast<std::size_t>(std::max<OpIndex>(tl.size(), 1));
  w.births.resize(n);
  w.deaths.resize(n);
  w.reads.resize(n);
  w.writes.resize(n);
  std::vector<long> index(p.tensors.size(), -1);
  for (const auto& t : p.tensors) {
    if (t.device != device || t.bytes == 0) continue;
    index[t.id] = static_cast<long>(w.tensors.size());
    w.tensors.push_back({t.id, static_cast<std::size_t>(t.bytes), t.birth_op, t.death_op});
  }
  std::vector<std::size_t> order(w.tensors.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto &ta = p.tensors[w.tensors[a].id], &tb = p.tensors[w.tensors[b].id];
    return std::tuple(ta.birth_op, ta.seq, ta.id) < std::tuple(tb.birth_op, tb.seq, tb.id);
  });
  for (std::size_t k : order) {
    const auto& t = w.tensors[k];
    if (t.birth == kBeforeIteration || t.birth < 0) {
      w.before.push_back(k);
      continue;
    }
    w.in_iteration.push_back(k);
    w.births[std::min<std::size_t>(static_cast<std::size_t>(t.birth), n - 1)].push_back(k);
    if (t.death != kAfterIteration && t.death >= t.birth)
      w.deaths[std::min<std::size_t>(static_cast<std::size_t>(t.death), n - 1)].push_back(k);
  }
  for (OpIndex i = 0; i < tl.size(); ++i) {
    if (!tl.leaf(i)) continue;  // a scope's tensors are touched by its children
    const auto& op = p.ops[static_cast<std::size_t>(i)];
    for (auto id : op.inputs)
      if (id < index.size() && index[id] >= 0) w.reads[static_cast<std::size_t>(i)].push_back(static_cast<std::size_t>(index[id]));
    for (auto id : op.outputs)
      if (id < index.size() && index[id] >= 0) w.writes[static_cast<std::size_t>(i)].push_back(static_cast<std::size_t>(index[id]));
  }
  w.peak_bytes = p.peak_bytes(device);
  return w;
}

namespace {

using Clock = std::chrono::steady_clock;

double ns_since(Clock::time_point t0) { return std::chrono::duration<double, std::nano>(Clock::now() - t0).count(); }

// Reads one word per cache line; the sum goes to a volatile so the loads stay.
void read_bytes(const void* p, std::size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i + 8 <= n; i += 64) {
    std::uint64_t v;
    std::memcpy(&v, b + i, 8);
    sum += v;
  }
  asm volatile("" : : "r"(sum) : "memory");  // keep the loads
}

}  // namespace

ReplayRunStats replay_on_nodes(const ReplayWorkload& w, Placement& placement, const ReplayRunOptions& opts) {
  ReplayRunStats s;
  std::vector<void*> addr(w.tensors.size(), nullptr);
  auto alloc = [&](std::size_t k, unsigned char fill) {
    void* p = placement.allocate(w.tensors[k].bytes);
    if (!p) throw out_of_memory(w.tensors[k].bytes, "replayer", 0, "the policy under test returned no memory");
    std::memset(p, fill, w.tensors[k].bytes);  // born: its pages are touched (the allocating op writes it)
    addr[k] = p;
  };
  for (std::size_t k : w.before) alloc(k, 1);
  if (opts.after_setup) {
    std::vector<void*> by_id;
    for (std::size_t k = 0; k < w.tensors.size(); ++k) {
      if (by_id.size() <= w.tensors[k].id) by_id.resize(w.tensors[k].id + 1, nullptr);
      by_id[w.tensors[k].id] = addr[k];
    }
    opts.after_setup(by_id);
  }

  const std::size_t ops = w.births.size();
  const std::size_t stride = std::max<std::size_t>(1, ops / static_cast<std::size_t>(std::max(1, opts.samples_per_iteration)));
  std::vector<double> timed_ns;
  for (int it = 0; it < opts.iterations; ++it) {
    double excluded = 0;
    const auto t0 = Clock::now();
    placement.begin_iteration();
    for (std::size_t i = 0; i < ops; ++i) {
      const auto op = static_cast<OpIndex>(i);
      placement.op_begin(op);
      for (std::size_t k : w.births[i]) alloc(k, static_cast<unsigned char>(it + 2));
      for (std::size_t k : w.reads[i])
        if (addr[k]) read_bytes(addr[k], w.tensors[k].bytes);
      for (std::size_t k : w.writes[i])
        if (addr[k]) std::memset(addr[k], static_cast<unsigned char>(i), w.tensors[k].bytes);
      placement.op_end(op);
      if (i % stride == 0) {  // residency sample, not timed
        const auto ts = Clock::now();
        std::map<int, std::uint64_t> on;
        for (std::size_t k = 0; k < addr.size(); ++k)
          if (addr[k]) add_residency(addr[k], w.tensors[k].bytes, on);
        s.fast_peak_bytes = std::max(s.fast_peak_bytes, on[opts.fast_node]);
        s.slow_peak_bytes = std::max(s.slow_peak_bytes, on[opts.slow_node]);
        excluded += ns_since(ts);
      }
      for (std::size_t k : w.deaths[i]) {
        placement.deallocate(addr[k], w.tensors[k].bytes);
        addr[k] = nullptr;
      }
    }
    for (std::size_t k : w.in_iteration) {  // alive at the end: freed before the next iteration
      if (!addr[k]) continue;
      placement.deallocate(addr[k], w.tensors[k].bytes);
      addr[k] = nullptr;
    }
    placement.end_iteration();
    const double elapsed = ns_since(t0) - excluded;
    if (it > 0 || opts.iterations == 1) timed_ns.push_back(elapsed);
  }
  for (std::size_t k : w.before) {
    placement.deallocate(addr[k], w.tensors[k].bytes);
    addr[k] = nullptr;
  }
  // The median: the machine running an emulated guest is shared, one slow iteration is noise.
  std::sort(timed_ns.begin(), timed_ns.end());
  s.iterations = static_cast<int>(timed_ns.size());
  const std::size_t m = timed_ns.size();
  s.step_ns = m == 0 ? 0 : m % 2 ? timed_ns[m / 2] : (timed_ns[m / 2 - 1] + timed_ns[m / 2]) / 2;
  s.min_ns = m ? timed_ns.front() : 0;
  s.max_ns = m ? timed_ns.back() : 0;
  return s;
}

}  // namespace tierpack::experiment
