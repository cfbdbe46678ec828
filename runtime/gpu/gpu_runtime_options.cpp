// Parsing of the GPU runtime's options (see gpu_runtime_options.hpp).
//
// TIERPACK_GPU keys:
//   chunk:32M           mapping/migration unit (a multiple of the GPU's 2 MiB granularity)
//   host_limit:64G      most host memory backing chunks (evicted groups, spilled chunks)
//   spill:on|off        over budget, back new chunks with host memory (on) or raise out of memory (off)
//   migrate:on|off      trace an iteration, plan, and move page groups (off: budgeted caching allocator)
//   group:512M          target page-group size of the built-in planner
//   headroom:0.85       fraction of the budget the planner fills (default 0.85)
//   persistent:on|off   also move tensors that live across iterations (parameters, optimizer state)
//   resident:on|off     where moves cannot meet the budget, keep some of them in host memory for good
//                       instead of spilling what is allocated at the peak (Note [Groups that live on the host])
//   min_move:1M         smaller tensors never move
//   evict_lag:4         allocator events the planner expects between issuing an eviction and its
//                       memory being free (larger: evictions earlier relative to the allocations
//                       that need their memory, fewer allocations waiting for them; more bytes moved)
//   prewarm_threads:4   threads creating host handles ahead of the first evictions
//   plan_out:PATH       write the plan the runtime made (JSON)
//   profile_out:PATH    write the observed iteration as a tierpack profile (%d: the device; default
//                       with TIERPACK_CONF profile_out:run.tpk: run.gpu%d.tpk)
//   remap_threads:1     threads sharing one gated batch of unmap/map calls
//   remap:eager         when ready chunks are remapped: eager (as soon as their copy is done) or idle
//                       (when no copy is in flight, unless something waits: Note [When to remap])
//   remap_delay:20      idle: the longest a ready chunk waits for its remap, in milliseconds
//   copy_piece:0        issue each chunk's copy in pieces of this size (0: one copy per chunk)
//   divergences:3       diverged iterations in a row before the plan is given up (1: at the first)
//   mechanism:storage   how tensors leave the device: storage (default: PyTorch's caching allocator stays,
//                       saved activations move as whole storages through autograd's saved-tensor hooks,
//                       in stream order, at the points the placer's plan names: python/tierpack/
//                       activations.py, Note [Storage moves]) or vmm (tierpack is PyTorch's allocator and
//                       moves page groups by remapping them behind gates: the keys below, chunk to gate)
//   fill:0.95           storage: live bytes the plan keeps under, as a fraction of the budget (default 0.95
//                       under limit:soft, 0.88 under limit:hard: the rest is for memory the allocator
//                       cannot give back, Note [Reserved memory])
//   limit:soft          storage: soft (default: no memory limit; where the allocator holds more than the
//                       budget the plan's limit on live bytes is lowered, and where no plan fits the run goes
//                       on over the budget and says so) or hard (once a plan fits, the budget is PyTorch's
//                       memory limit: the allocator gives its cached pages back when it would pass it, which
//                       is faster, and an allocation past it raises torch.OutOfMemoryError)
//   recompute:on        storage: saved storages the runtime can make again bit for bit (an activation's
//                       output from its input, autocast's copy of a parameter, what a small module saved)
//                       may be let go and made again at their use where the cost model finds that faster
//                       than a copy (placer/saved_plan.cpp, Notes [Recompute], [Recompute cost]); off:
//                       copies only
//   gc:freeze           storage: at the first plan, Python's collector leaves the objects alive then out of
//                       later collections (gc.freeze: a full collection inside a hook stalls the GPU; Note
//                       [Python's collector] in python/tierpack/python_collector.py); as-is: the collector untouched
//   step:whole          storage: the optimizer step needs all its state back first (whole), or updates the
//                       parameters a chunk at a time, each chunk's state fetched just before and sent out right
//                       after (stream: placer/saved_plan.cpp and python/tierpack/optimizer_state.py, Note [Streamed
//                       step]), so the step holds a window of state instead of all of it
//   verify:sampled      check moved chunks behind the gate and copy again what was written after the
//                       copy: sampled (evictions in full, prefetches on 1/16 samples), all (in full:
//                       prefetch checks read host memory, ~as slow as the copy), evictions, off
//   gate:on             off: diagnostic only. Remaps run while the training's kernels do, so a
//                       kernel the plan did not foresee touching a chunk mid-remap faults and the
//                       process dies (Note [Remap gate]); it measures what the gates cost
#include "runtime/gpu/gpu_runtime_options.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "core/error.hpp"
#include "core/process_rank.hpp"

namespace tierpack::gpu {
namespace {

[[noreturn]] void bad(std::string_view key, std::string_view value, std::string_view accepted) {
  throw logic_error("TIERPACK_GPU: invalid value '" + std::string(value) + "' for key '" + std::string(key) +
                    "' (accepted: " + std::string(accepted) + ")");
}

bool parse_switch(std::string_view key, std::string_view v) {
  if (v == "on" || v == "1" || v == "true") return true;
  if (v == "off" || v == "0" || v == "false") return false;
  bad(key, v, "on, off");
}

int parse_int(std::string_view key, std::string_view v, int lo, int hi, std::string_view accepted) {
  int n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc{} || p != v.data() + v.size() || n < lo || n > hi) bad(key, v, accepted);
  return n;
}

double parse_fraction(std::string_view key, std::string_view v) {
  double h = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), h);
  if (ec != std::errc{} || p != v.data() + v.size() || h <= 0 || h > 1) bad(key, v, "a number in (0, 1]");
  return h;
}

std::uint64_t parse_size(std::string_view key, std::string_view v) {
  try {
    return parse_bytes(v);
  } catch (const logic_error&) {
    bad(key, v, "a size such as 32M");
  }
}

}  // namespace

GpuRuntimeOptions apply_core_config(const Config& c, GpuRuntimeOptions o) {
  if (c.gpu_budget.is_set()) o.budget = c.gpu_budget;
  o.stats_out = c.stats_out;
  // TIERPACK_CONF's profile_out is the host runtime's file (tierpack run -o run.tpk): the GPU tier
  // writes its own next to it, run.gpu<N>.tpk (<N> filled in by the runtime).
  if (!c.profile_out.empty()) o.profile_out = device_sibling_path(c.profile_out, -1, ".tpk");
  o.log = c.log;
  o.warmup_iterations = c.warmup_iterations;
  return o;
}

GpuRuntimeOptions parse_gpu_options(std::string_view text, GpuRuntimeOptions o) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos) throw logic_error("TIERPACK_GPU: '" + std::string(item) + "' is not key:value");
    const std::string_view key = item.substr(0, colon), value = item.substr(colon + 1);
    if (key == "chunk") {
      o.chunk_bytes = parse_size(key, value);
      if (o.chunk_bytes == 0 || o.chunk_bytes % (std::uint64_t{2} << 20) != 0) bad(key, value, "a multiple of 2M");
    } else if (key == "host_limit") {
      o.host_limit = parse_size(key, value);
    } else if (key == "spill") {
      o.spill = parse_switch(key, value);
    } else if (key == "migrate") {
      o.migrate = parse_switch(key, value);
    } else if (key == "persistent") {
      o.move_persistent = parse_switch(key, value);
    } else if (key == "resident") {
      o.host_resident = parse_switch(key, value);
    } else if (key == "group") {
      o.group_bytes = parse_size(key, value);
    } else if (key == "min_move") {
      o.min_move_bytes = parse_size(key, value);
    } else if (key == "evict_lag") {
      o.eviction_lag = parse_int(key, value, 0, 100000, "0..100000 (allocator events)");
    } else if (key == "headroom") {
      o.headroom = parse_fraction(key, value);
    } else if (key == "prewarm_threads") {
      o.prewarm_threads = parse_int(key, value, 0, 64, "0..64");
    } else if (key == "plan_out") {
      o.plan_out = std::string(value);
    } else if (key == "profile_out") {
      o.profile_out = std::string(value);
    } else if (key == "remap_threads") {
      o.remap_threads = parse_int(key, value, 1, 16, "1..16");
    } else if (key == "divergences") {
      o.phases.divergence_limit = parse_int(key, value, 1, 1000000, "1..1000000");
    } else if (key == "remap") {
      if (value == "eager") o.remap_when = RemapWhen::eager;
      else if (value == "idle") o.remap_when = RemapWhen::idle;
      else bad(key, value, "eager, idle");
    } else if (key == "remap_delay") {
      o.remap_max_delay = std::chrono::milliseconds(parse_int(key, value, 0, 10000, "0..10000 (milliseconds)"));
    } else if (key == "copy_piece") {
      o.copy_piece = parse_size(key, value);
      if (o.copy_piece % (std::uint64_t{1} << 20) != 0) bad(key, value, "0 or a multiple of 1M");
    } else if (key == "verify") {
      if (value == "all") o.verify = Verify::all;
      else if (value == "sampled") o.verify = Verify::sampled;
      else if (value == "evictions") o.verify = Verify::evictions;
      else if (value == "off") o.verify = Verify::off;
      else bad(key, value, "sampled, all, evictions, off");
    } else if (key == "gate") {
      o.gate = parse_switch(key, value);
    } else if (key == "mechanism") {
      if (value == "storage") o.mechanism = Mechanism::storage;
      else if (value == "vmm") o.mechanism = Mechanism::vmm;
      else bad(key, value, "storage, vmm");
    } else if (key == "fill") {
      o.fill = parse_fraction(key, value);
    } else if (key == "limit") {
      if (value == "hard") o.hard_limit = true;
      else if (value == "soft") o.hard_limit = false;
      else bad(key, value, "soft, hard");
    } else if (key == "recompute") {
      if (value == "on") o.recompute = true;
      else if (value == "off") o.recompute = false;
      else bad(key, value, "on, off");
    } else if (key == "gc") {
      if (value == "freeze") o.gc_freeze = true;
      else if (value == "as-is") o.gc_freeze = false;
      else bad(key, value, "freeze, as-is");
    } else if (key == "step") {
      if (value == "stream") o.stream_step = true;
      else if (value == "whole") o.stream_step = false;
      else bad(key, value, "whole, stream");
    } else if (key == "autocast_cache") {
      o.autocast_cache = parse_switch(key, value);
    } else if (key == "copies") {
      if (value == "raw") o.raw_copies = true;
      else if (value == "torch") o.raw_copies = false;
      else bad(key, value, "raw, torch");
    } else if (key == "budget") {  // convenience: same as TIERPACK_CONF's gpu_budget
      try {
        o.budget = parse_budget(value);
      } catch (const logic_error&) {
        bad(key, value, "a size such as 24G or a percentage such as 60%");
      }
    } else {
      throw logic_error("TIERPACK_GPU: unknown key '" + std::string(key) +
                        "' (accepted keys: chunk, host_limit, spill, migrate, persistent, resident, group, headroom, "
                        "min_move, evict_lag, prewarm_threads, plan_out, profile_out, remap_threads, remap, remap_delay, "
                        "copy_piece, divergences, verify, gate, mechanism, fill, limit, recompute, gc, step, "
                        "autocast_cache, copies, budget)");
    }
  }
  return o;
}

GpuRuntimeOptions gpu_options_from_env() {
  GpuRuntimeOptions o = apply_core_config(config_from_env(), GpuRuntimeOptions{});
  if (const char* g = std::getenv("TIERPACK_GPU")) o = parse_gpu_options(g, o);
  return o;
}

}  // namespace tierpack::gpu
