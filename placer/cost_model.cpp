// Cost model figures and defaults (see cost_model.hpp, docs/simulator.md).
#include "placer/cost_model.hpp"

#include <algorithm>
#include <cstdio>

#include "core/error.hpp"

namespace tierpack::placer {
namespace {

// Defaults used only where the tier model gives no figure. Sources: BRIEF.md's measured facts on the
// H200 machine (PCIe, HBM, VMM call costs) and nominal DRAM/CXL figures (core/presets/).
constexpr double kDefaultPcieBytesPerS = 55e9;       // pinned copies, each way
constexpr double kDefaultPcieBothWaysBytesPerS = 100e9;  // pinned copies both ways at once, measured (h200-pcie.json)
constexpr double kDefaultHbmBytesPerS = 4.3e12;
constexpr double kDefaultDramBytesPerS = 200e9;
constexpr double kDefaultSlowHostBytesPerS = 36e9;   // one CXL module
constexpr double kDefaultHostMigrationBytesPerS = 20e9;
constexpr double kGpuMoveOverheadNs = 60e3;   // VMM unmap ~22 us + map ~1 us + setAccess ~35 us
constexpr double kHostMoveOverheadNs = 10e3;  // one move_pages/mbind call and its TLB shootdown
// The GPU runtime's remaps (Note [Remap gate] in migrate/gpu/group_mover.hpp), per GiB of 64 MiB
// chunks, as BM_RemapParts measured them on the H200 while copies ran both ways (the runtime's
// gates are nearly all closed during copies: busy_gates ~ gates in bench/results/gpu-h200-2026-11-29-5):
// an eviction unmaps device chunks (0.59 ms/GiB) and maps host memory (0.02 + 17.52 set-access); a
// prefetch unmaps host chunks (7.11) and maps device memory (0.03 + 16.35). With the copy engines
// idle the same calls cost 12.1 (host) and 0.67 (device) ms/GiB in all (gpu-h200-2026-11-29-4).
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGpuRemapHoldToSlowNsPerByte = 18.13e6 / kGiB;
constexpr double kGpuRemapHoldToFastNsPerByte = 23.49e6 / kGiB;

std::string gbps(double bytes_per_s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB/s", bytes_per_s / 1e9);
  return buf;
}

double default_latency(TierKind k) { return k == TierKind::gpu ? 0 : k == TierKind::host_dram ? 100 : 180; }

}  // namespace

TierChoice choose_tiers(const TierModel& model, int device) {
  TIERPACK_EXPECTS(!model.tiers.empty(), "tier model has no tiers");
  TierChoice c;
  if (device >= 0) {
    for (const auto& t : model.tiers)
      if (t.kind == TierKind::gpu && t.device == device) { c.fast = t.id; break; }
    if (c.fast == kNoTier) {
      const auto gpus = model.of_kind(TierKind::gpu);
      c.fast = gpus.empty() ? TierId(0) : gpus.front();
      c.note = "the tier model has no tier for GPU " + std::to_string(device) + ": its tensors are planned on " +
               model.tiers[c.fast].name;
    }
  } else {
    const auto dram = model.of_kind(TierKind::host_dram);
    if (!dram.empty()) {
      c.fast = dram.front();
    } else {
      for (const auto& t : model.tiers)
        if (t.kind != TierKind::gpu) { c.fast = t.id; break; }
      if (c.fast == kNoTier) c.fast = 0;
      c.note = "the tier model has no host DRAM tier: host tensors are planned on " + model.tiers[c.fast].name;
    }
  }
  // The slow tier must be one the device can read in place: host or far memory, never another GPU.
  for (const auto& t : model.tiers)
    if (t.id != c.fast && t.kind != TierKind::gpu) { c.slow = t.id; break; }
  return c;
}

CostModel make_cost_model(const TierModel& model, const TierChoice& tiers, int device) {
  CostModel m;
  m.fast = tiers.fast;
  m.slow = tiers.slow;
  const Tier& fast = model.at(tiers.fast);
  const bool gpu = fast.kind == TierKind::gpu;
  (void)device;
  m.move_overhead_ns = gpu ? kGpuMoveOverheadNs : kHostMoveOverheadNs;
  m.op_times_bound_traffic = !gpu;
  double fast_bw = 0;
  if (fast.bandwidth_bytes_per_s) {
    fast_bw = *fast.bandwidth_bytes_per_s;
  } else {
    fast_bw = gpu ? kDefaultHbmBytesPerS : kDefaultDramBytesPerS;
    m.assumptions.push_back(fast.name + " bandwidth not given: " + gbps(fast_bw) + " assumed");
  }
  m.fast_access_bytes_per_ns = fast_bw / 1e9;
  m.fast_latency_ns = fast.latency_ns.value_or(default_latency(fast.kind));
  if (tiers.slow == kNoTier) {
    m.slow_access_bytes_per_ns = m.fast_access_bytes_per_ns;
    m.to_fast_bytes_per_ns = m.to_slow_bytes_per_ns = m.fast_access_bytes_per_ns;
    m.slow_latency_ns = m.fast_latency_ns;
    return m;
  }
  const Tier& slow = model.at(tiers.slow);
  if (gpu) {
    m.remap_hold_ns_per_byte_to_slow = kGpuRemapHoldToSlowNsPerByte;
    m.remap_hold_ns_per_byte_to_fast = kGpuRemapHoldToFastNsPerByte;
    m.assumptions.push_back("remaps hold the GPU's streams 18.1 ms per GiB evicted and 23.5 ms per GiB prefetched (VMM calls "
                            "measured on the H200 with copies running)");
  }
  m.slow_latency_ns = slow.latency_ns.value_or(default_latency(slow.kind));
  const Link* up = model.link(tiers.slow, tiers.fast);
  const Link* down = model.link(tiers.fast, tiers.slow);
  if (!up) up = down;
  if (!down) down = up;
  if (up) {
    m.to_fast_bytes_per_ns = up->bandwidth_bytes_per_s / 1e9;
    m.to_slow_bytes_per_ns = down->bandwidth_bytes_per_s / 1e9;
    m.full_duplex = up->full_duplex && down->full_duplex;
    const double both = std::max(up->both_ways_bytes_per_s, down->both_ways_bytes_per_s);
    m.both_ways_bytes_per_ns = both > 0 ? both / 1e9 : m.to_fast_bytes_per_ns + m.to_slow_bytes_per_ns;
  } else if (gpu) {
    m.to_fast_bytes_per_ns = m.to_slow_bytes_per_ns = kDefaultPcieBytesPerS / 1e9;
    m.full_duplex = true;
    m.both_ways_bytes_per_ns = kDefaultPcieBothWaysBytesPerS / 1e9;
    m.assumptions.push_back("no link " + fast.name + " <-> " + slow.name + ": PCIe gen5 x16 as on the H200 (55 GB/s each way, 100 GB/s both ways, measured there) assumed");
  } else {
    double bw = kDefaultHostMigrationBytesPerS;
    if (slow.bandwidth_bytes_per_s) bw = std::min(*slow.bandwidth_bytes_per_s, fast_bw);
    else m.assumptions.push_back("no link " + fast.name + " <-> " + slow.name + " and no bandwidth for " + slow.name + ": " + gbps(bw) + " migration assumed");
    m.to_fast_bytes_per_ns = m.to_slow_bytes_per_ns = bw / 1e9;
    m.full_duplex = false;
    m.both_ways_bytes_per_ns = bw / 1e9;
  }
  if (slow.bandwidth_bytes_per_s) {
    m.slow_access_bytes_per_ns = *slow.bandwidth_bytes_per_s / 1e9;
  } else if (gpu) {
    m.slow_access_bytes_per_ns = m.to_fast_bytes_per_ns;  // a kernel reads host memory over the same link
  } else {
    m.slow_access_bytes_per_ns = kDefaultSlowHostBytesPerS / 1e9;
    m.assumptions.push_back(slow.name + " bandwidth not given: " + gbps(kDefaultSlowHostBytesPerS) + " assumed");
  }
  return m;
}

double CostModel::transfer_ns(std::uint64_t bytes, bool to_fast) const {
  const double rate = to_fast ? to_fast_bytes_per_ns : to_slow_bytes_per_ns;
  return move_overhead_ns + static_cast<double>(bytes) / rate;
}

double CostModel::remap_hold_ns(std::uint64_t bytes, bool to_fast) const {
  return static_cast<double>(bytes) * (to_fast ? remap_hold_ns_per_byte_to_fast : remap_hold_ns_per_byte_to_slow);
}

double CostModel::shared_rate(bool to_fast) const {
  const double alone = to_fast ? to_fast_bytes_per_ns : to_slow_bytes_per_ns;
  if (!full_duplex) return alone;  // a half-duplex link serves one copy at a time
  return std::min(alone, both_ways_bytes_per_ns / 2);
}

// Note [Launch times]
// The roofline's `touched` fraction reads an op that ran faster than its tensors' bytes allow as an
// op that read only part of them (an embedding lookup in a large table). That holds where the op's
// time is the time the thread spent running it: host tiers. A GPU op's time in a profile is its
// launch on the host thread (RecordFunction on the CPU; the kernel runs later), so the fraction
// would be launch time over kernel time, whatever the kernel reads: on GPT-2 large at 35% it charged
// the 14.5 GB that AdamW's foreach ops read in place over the link 24.5 ms, where 48 GB/s takes 303
// ms (bench/results/experiment-2026-11-30-2). On a GPU every tensor an op touches is taken to be
// read once in full.
double CostModel::op_ns(double profiled_ns, std::uint64_t fast_bytes, std::uint64_t slow_bytes,
                        std::uint32_t slow_tensors) const {
  if (slow_bytes == 0) return profiled_ns;
  const double all_fast = static_cast<double>(fast_bytes + slow_bytes) / fast_access_bytes_per_ns;
  const double touched =
      op_times_bound_traffic && all_fast > profiled_ns && all_fast > 0 ? profiled_ns / all_fast : 1.0;
  const double mem = static_cast<double>(fast_bytes) / fast_access_bytes_per_ns +
                     static_cast<double>(slow_bytes) / slow_access_bytes_per_ns;
  const double latency = slow_tensors * std::max(0.0, slow_latency_ns - fast_latency_ns);
  return std::max(profiled_ns, touched * mem + latency);
}

}  // namespace tierpack::placer
