// The GPU tier of one device behind the pluggable allocator (see gpu_runtime.hpp).
#include "runtime/gpu/gpu_runtime.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/process_rank.hpp"
#include "core/units.hpp"
#include "migrate/gpu/trace_align.hpp"

namespace tierpack::gpu {
namespace {
constexpr TierId kGpuTier = 0, kHostTier = 1;  // GpuRuntime::topology()
}  // namespace

const char* GpuRuntime::phase_name_locked() const {
  switch (phases_.phase()) {
    case RunPhase::recording: return phases_.recorded() == 0 ? "observed" : "reference";
    case RunPhase::off: return "fallback";
    default: return to_string(phases_.phase());
  }
}

bool GpuRuntime::observing_locked() const {
  return phases_.phase() == RunPhase::recording && phases_.recorded() == 0;
}

GpuRuntime::GpuRuntime(std::unique_ptr<VmmBackend> backend, Config settings, int device)
    : settings_(std::move(settings)), device_(device), backend_(std::move(backend)),
      phases_(settings_.gpu.phases) {
  GpuAllocatorOptions ao;
  ao.chunk_bytes = settings_.gpu.chunk_bytes;
  const std::size_t g = backend_->info().granularity;
  ao.page_bytes = std::min<std::size_t>(g, ao.chunk_bytes);
  ao.small_threshold = std::min<std::size_t>(std::size_t{1} << 20, ao.page_bytes / 2);
  ao.host_limit = settings_.gpu.host_limit;
  ao.spill_to_host = settings_.gpu.spill;
  ao.tier_name = "gpu" + std::to_string(device);
  if (settings_.gpu_budget.bytes) ao.device_budget = *settings_.gpu_budget.bytes;
  alloc_ = std::make_unique<GpuAllocator>(*backend_, ao);
  gpu_budget_bytes_ = alloc_->device_budget();
  MoverOptions mo;
  mo.remap_threads = settings_.gpu.remap_threads;
  mo.verify = settings_.gpu.verify;
  mo.gate = settings_.gpu.gate;
  mo.remap_when = settings_.gpu.remap_when;
  mo.remap_max_delay = settings_.gpu.remap_max_delay;
  mo.copy_piece = settings_.gpu.copy_piece;
  mo.on_rewrite = [this](const RewriteReport& r) { note_rewrite(r); };
  mover_ = std::make_unique<GroupMover>(*alloc_, mo);
  alloc_->set_pressure_handler([m = mover_.get()] { return m->wait_for_eviction(); });
  iteration_start_ = std::chrono::steady_clock::now();
  if (settings_.gpu.migrate && settings_.warmup_iterations == 0) {
    phases_.record();
    start_trace_locked();
  }
  timeline_stride_ = 64;
  if (!settings_.gpu.gate)
    log("gate:off (diagnostic): remaps run while kernels do; a kernel the plan did not foresee faults the process");
}

GpuRuntime::~GpuRuntime() {
  for (std::thread& t : prewarm_) t.join();
  executor_.reset();
  mover_.reset();
  alloc_.reset();
}

void GpuRuntime::log(const std::string& line) const {
  if (settings_.log != LogLevel::quiet) std::fprintf(stderr, "tierpack: %s\n", line.c_str());
}

std::string GpuRuntime::describe() const {
  return "GPU tier on gpu" + std::to_string(device_) + " (" + backend_->info().device_name + ", " +
         backend_->info().name + "): budget " + format_bytes(gpu_budget_bytes_) +
         (settings_.gpu_budget.fraction ? " until the traced iteration resolves " + settings_.gpu_budget.to_string()
                                        : "") +
         ", chunk " + format_bytes(settings_.gpu.chunk_bytes) +
         ", spill to host " + (settings_.gpu.spill ? "on" : "off") +
         ", migration " + (settings_.gpu.migrate ? "on" : "off");
}

bool GpuRuntime::owns(const void* p) const {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return a >= alloc_->base() && a < alloc_->base() + alloc_->reservation_bytes();
}

bool GpuRuntime::tracing() const {
  std::lock_guard lk(m_);
  return observing_locked();
}

void GpuRuntime::tick_locked(StreamHandle stream) {
  ++clock_;
  clock_now_.store(clock_, std::memory_order_relaxed);
  if (phases_.following() && executor_) executor_->advance(clock_, stream);
  if (clock_ % timeline_stride_ == 0 && timeline_.size() < 4096)
    timeline_.push_back({clock_, since_start_ns(), alloc_->device_bytes(),
                         {alloc_->segment_bytes(Residence::device), alloc_->segment_bytes(Residence::host)}});
}

void* GpuRuntime::allocate(std::size_t bytes, StreamHandle stream) {
  if (bytes == 0) return nullptr;
  ArenaId arena = kDefaultArena;
  std::int64_t seq = 0, birth = 0;
  bool traced = false;
  {
    std::lock_guard lk(m_);
    stream_ = stream;
    tick_locked(stream);
    birth = clock_;
    seq = seq_++;
    if (phases_.following()) {
      if (seq >= planned_allocations_) {
        diverge_locked("iteration " + std::to_string(iteration_) + " allocates more than the traced one (" +
                       std::to_string(planned_allocations_) + " allocations)");
      } else if (planned_[static_cast<std::size_t>(seq)].bytes != bytes) {
        diverge_locked("allocation " + std::to_string(seq) + " of iteration " + std::to_string(iteration_) + " is " +
                       format_bytes(bytes) + ", the traced one was " +
                       format_bytes(planned_[static_cast<std::size_t>(seq)].bytes));
      } else {
        arena = planned_[static_cast<std::size_t>(seq)].arena;
      }
    }
    traced = phases_.phase() == RunPhase::recording;
  }
  void* p = alloc_->allocate(bytes, stream, arena);
  if (arena != kDefaultArena && settings_.gpu.verify != Verify::off) {
    std::lock_guard g(diag_m_);
    block_seq_[reinterpret_cast<std::uintptr_t>(p)] = seq;
  }
  if (traced) {
    std::lock_guard lk(m_);
    if (phases_.phase() == RunPhase::recording) {
      TracedTensor t;
      t.seq = seq;
      t.address = reinterpret_cast<std::uintptr_t>(p);
      t.bytes = bytes;
      t.birth = birth;
      const auto idx = static_cast<std::uint32_t>(trace_.tensors.size());
      live_[t.address] = idx;
      trace_.tensors.push_back(std::move(t));
      trace_.events.push_back({true, idx});
      ProfiledTensor pt;
      pt.birth_op = frames_.empty() ? static_cast<std::int32_t>(profile_ops_.size()) : frames_.back().op;
      pt.birth_ns = since_start_ns();
      pt.stream = static_cast<std::uint64_t>(stream);
      profile_tensors_.push_back(pt);
    }
  }
  return p;
}

void GpuRuntime::deallocate(void* p) noexcept {
  if (!p) return;
  try {
    std::lock_guard lk(m_);
    tick_locked(stream_);
    if (phases_.phase() == RunPhase::recording) {
      auto it = live_.find(reinterpret_cast<std::uintptr_t>(p));
      if (it != live_.end()) {
        trace_.tensors[it->second].death = clock_;
        if (it->second < profile_tensors_.size()) {
          profile_tensors_[it->second].death_op =
              frames_.empty() ? static_cast<std::int32_t>(profile_ops_.size()) : frames_.back().op;
          profile_tensors_[it->second].death_ns = since_start_ns();
        }
        trace_.events.push_back({false, it->second});
        live_.erase(it);
      }
    }
  } catch (const std::exception& e) {
    log(std::string("migration step failed while freeing (the free still happens): ") + e.what());
  } catch (...) {
  }
  if (settings_.gpu.verify != Verify::off) {
    std::lock_guard g(diag_m_);
    block_seq_.erase(reinterpret_cast<std::uintptr_t>(p));
  }
  alloc_->deallocate(p);
}

void GpuRuntime::record_stream(void* p, StreamHandle stream) { alloc_->record_stream(p, stream); }

void GpuRuntime::add_stream(StreamHandle stream) { alloc_->add_stream(stream); }

void GpuRuntime::empty_cache() { alloc_->empty_cache(); }

void GpuRuntime::op_begin(const char* name) {
  std::lock_guard lk(m_);
  if (!observing_locked()) return;
  OpRecord op;
  op.index = static_cast<OpIndex>(profile_ops_.size());
  op.name = name && *name ? name : "op";
  op.begin_ns = op.end_ns = since_start_ns();
  op.parent = frames_.empty() ? -1 : frames_.back().op;
  frames_.push_back(Frame{clock_, {}, op.index});
  profile_ops_.push_back(std::move(op));
}

void GpuRuntime::op_tensor(const void* p) {
  std::lock_guard lk(m_);
  if (!observing_locked() || frames_.empty()) return;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto it = live_.upper_bound(a);
  if (it == live_.begin()) return;
  --it;
  const TracedTensor& t = trace_.tensors[it->second];
  if (a < t.address + std::max<std::uint64_t>(t.bytes, 1)) frames_.back().tensors.push_back(it->second);
}

void GpuRuntime::op_end() {
  std::lock_guard lk(m_);
  if (!observing_locked() || frames_.empty()) return;
  Frame f = std::move(frames_.back());
  frames_.pop_back();
  for (std::uint32_t t : f.tensors) trace_.tensors[t].uses.push_back({f.from, clock_});
  if (f.op >= 0 && static_cast<std::size_t>(f.op) < profile_ops_.size()) {
    OpRecord& op = profile_ops_[static_cast<std::size_t>(f.op)];
    op.end_ns = std::max(op.begin_ns, since_start_ns());
    std::sort(f.tensors.begin(), f.tensors.end());
    f.tensors.erase(std::unique(f.tensors.begin(), f.tensors.end()), f.tensors.end());
    for (std::uint32_t t : f.tensors) {
      // Allocated inside the op: an output; otherwise read (the observer cannot tell reads from writes).
      if (t < profile_tensors_.size() && profile_tensors_[t].birth_op == f.op) op.outputs.push_back(t);
      else op.inputs.push_back(t);
    }
  }
}

std::uint64_t GpuRuntime::since_start_ns() const {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - iteration_start_).count());
}

// Note [Rewrite reports]
// A verified remap (Note [Verified remaps] in migrate/gpu/group_mover.hpp) that had to copy a chunk
// again means some kernel wrote a page group the plan said was idle: no data was lost, but the plan
// missed a use. The runtime names the live tensors in that chunk by their allocation position in the
// plan and the uses the plan knew of, with the clock of the moment, so the missed use can be found.
// The first 32 reports are logged at the end of their iteration; all are counted in the statistics.
void GpuRuntime::note_rewrite(const RewriteReport& r) {
  std::string line = "verify: gpu" + std::to_string(device_) + " " + (r.to == Residence::host ? "eviction" : "prefetch") +
                     " of arena " + std::to_string(r.arena) + " chunk " + std::to_string(r.va - alloc_->base()) +
                     " was written between its copy and its remap (copied again behind the gate, nothing lost); "
                     "iteration " + std::to_string(iteration_now_.load()) + ", clock " +
                     std::to_string(clock_now_.load()) + "; live tensors:";
  std::vector<LiveBlock> blocks;
  try {
    blocks = alloc_->live_blocks();
  } catch (...) {
  }
  std::lock_guard g(diag_m_);
  ++rewrite_reports_;
  missed_.push_back(Missed{r.arena, r.to, clock_now_.load(), iteration_now_.load()});
  if (rewrite_notes_.size() >= 32 || rewrite_reports_ > 32) return;
  int shown = 0;
  for (const LiveBlock& b : blocks) {
    if (b.addr + b.size <= r.va || b.addr >= r.va + r.bytes) continue;
    if (++shown > 6) {
      line += " ...";
      break;
    }
    const DiagTensor* d = nullptr;
    std::string who;
    if (auto it = block_seq_.find(b.addr); it != block_seq_.end()) {
      who = "#" + std::to_string(it->second);
      if (auto dt = diag_seq_.find(it->second); dt != diag_seq_.end()) d = &dt->second;
    } else if (auto dc = diag_carried_.find(b.addr); dc != diag_carried_.end()) {
      who = "carried";
      d = &dc->second;
    } else {
      who = "unplanned";
    }
    line += " " + who + " " + format_bytes(b.size);
    if (d) {
      line += " uses";
      int u = 0;
      for (const TracedUse& use : d->uses) {
        if (++u > 4) {
          line += " ...";
          break;
        }
        line += " " + std::to_string(use.from) + "-" + std::to_string(use.to);
      }
    }
    line += ";";
  }
  if (shown == 0) line += " none";
  rewrite_notes_.push_back(std::move(line));
}

// Between iterations (m_ held): the missed uses reported since the last call, one repair per group
// and direction with the latest clock (two chunks of one move report the same use), applied only to
// reports of the iteration that just ended (a late report of an older move says nothing new).
void GpuRuntime::repair_locked() {
  std::vector<Missed> missed;
  {
    std::lock_guard g(diag_m_);
    missed.swap(missed_);
  }
  if (!executor_ || !phases_.following()) return;
  std::map<std::pair<ArenaId, int>, std::int64_t> latest;
  for (const Missed& m : missed) {
    if (m.iteration != iteration_) continue;
    auto& at = latest[{m.arena, static_cast<int>(m.to)}];
    at = std::max(at, m.clock);
  }
  for (const auto& [key, at] : latest) {
    auto it = arena_group_.find(key.first);
    if (it == arena_group_.end()) continue;
    mover_->verify_always(key.first);
    const std::string what = executor_->repair(
        it->second, static_cast<Residence>(key.second) == Residence::host ? MoveKind::evict : MoveKind::prefetch, at);
    if (what.empty()) continue;
    ++repairs_;
    log("schedule repaired on gpu" + std::to_string(device_) + ": " + what);
  }
}

// Note [Runtime profile]
// With profile_out set, the observed iteration (the one the op observer watched) is written as a
// core Profile: its ops in order (names from the observer), every tensor alive in it with its
// allocation position, lifetime in op indices, the ops that touched it, and the tier its chunk
// lives on at the end of the iteration (gpu0 or host: the GPU tier's residency by page group, as
// the warm-up under the budget left it). Reads and writes are not told apart (the observer sees
// arguments only): a tensor allocated inside an op is its output, everything else an input. This
// is the value the placer and the simulator take (Profile -> placer -> Plan); the runtime's own
// planner (placer/vmm_plan.hpp) still plans the GPU moves from the same trace.
Topology GpuRuntime::topology() const {
  Topology t;
  Tier gpu;
  gpu.kind = TierKind::gpu;
  gpu.name = "gpu" + std::to_string(device_);
  gpu.device = device_;
  gpu.capacity_bytes = backend_->info().device_bytes;
  gpu.page_size = settings_.gpu.chunk_bytes;
  gpu.source = backend_->info().name;
  Tier host;
  host.kind = TierKind::host_dram;
  host.name = "host";
  host.numa_node = backend_->info().host_numa_node;
  host.page_size = settings_.gpu.chunk_bytes;
  host.source = backend_->info().name;
  if (t.add(gpu) != kGpuTier || t.add(host) != kHostTier) throw logic_error("GPU runtime topology: unexpected tier ids");
  return t;
}

void GpuRuntime::write_profile_locked() {
  Profile p;
  profile_id_ = new_profile_id();
  p.meta.id = profile_id_;
  p.meta.tool_version = "tierpack gpu runtime";
  p.meta.framework = "torch (CUDA pluggable allocator)";
  p.meta.page_tracer = "none";
  p.meta.host_page_size = 4096;
  p.meta.created_unix = static_cast<std::int64_t>(std::time(nullptr));
  p.meta.iterations_observed = iteration_;
  p.meta.profiled_iteration = iteration_;
  p.meta.iteration_source = "optimizer-step";
  p.topology = topology();
  const TierId gpu_id = kGpuTier, host_id = kHostTier;
  p.ops = profile_ops_;
  const auto n_ops = static_cast<OpIndex>(p.ops.size());
  p.tensors.resize(trace_.tensors.size());
  for (std::size_t i = 0; i < trace_.tensors.size(); ++i) {
    const TracedTensor& t = trace_.tensors[i];
    TensorRecord& r = p.tensors[i];
    r.id = static_cast<std::uint32_t>(i);
    r.seq = t.seq;
    r.bytes = t.bytes;
    r.device = device_;
    r.address = t.address;
    if (i < profile_tensors_.size() && t.seq >= 0) {
      const ProfiledTensor& pt = profile_tensors_[i];
      r.birth_op = std::min(pt.birth_op, n_ops);
      r.death_op = pt.death_op == kAfterIteration ? kAfterIteration : std::clamp(pt.death_op, r.birth_op, n_ops);
      r.birth_ns = pt.birth_ns;
      r.death_ns = pt.death_ns;
      r.stream = pt.stream;
    } else {
      r.birth_op = kBeforeIteration;
      if (i < profile_tensors_.size() && profile_tensors_[i].death_op != kAfterIteration)
        r.death_op = std::clamp(profile_tensors_[i].death_op, 0, n_ops);
    }
    if (t.death < 0) r.death_op = kAfterIteration;
    const auto where = alloc_->residence_of(reinterpret_cast<const void*>(t.address));
    r.tier = !where ? kNoTier : *where == Residence::device ? gpu_id : host_id;
  }
  for (const OpRecord& op : p.ops) {
    for (std::uint32_t t : op.inputs) p.tensors[t].uses.push_back(op.index);
    for (std::uint32_t t : op.outputs) p.tensors[t].uses.push_back(op.index);
  }
  for (TensorRecord& r : p.tensors) {
    std::sort(r.uses.begin(), r.uses.end());
    r.uses.erase(std::unique(r.uses.begin(), r.uses.end()), r.uses.end());
  }
  p.iteration_ns = since_start_ns();
  IterationInfo info;
  info.index = iteration_;
  info.duration_ns = p.iteration_ns;
  info.allocations = static_cast<std::uint32_t>(seq_);
  p.iterations.push_back(info);
  p.validate();
  std::string path = gpu_profile_path(settings_);
  if (const std::size_t at = path.find("%d"); at != std::string::npos) path.replace(at, 2, std::to_string(device_));
  write_profile(p, path);
  log("profile of the observed iteration written to " + path + " (" + std::to_string(p.ops.size()) +
      " ops, " + std::to_string(p.tensors.size()) + " tensors)");
}

void GpuRuntime::start_trace_locked() {
  trace_ = IterationTrace{};
  live_.clear();
  frames_.clear();
  profile_ops_.clear();
  profile_tensors_.clear();
  for (const LiveBlock& b : alloc_->live_blocks()) {
    TracedTensor t;
    t.seq = -1;
    t.address = b.addr;
    t.bytes = b.size;
    t.segment = b.segment;
    t.segment_bytes = b.segment_bytes;
    live_[t.address] = static_cast<std::uint32_t>(trace_.tensors.size());
    trace_.tensors.push_back(std::move(t));
    profile_tensors_.push_back(ProfiledTensor{});
  }
}

void GpuRuntime::finish_trace_locked() {
  trace_.clock_end = clock_;
  planned_allocations_ = seq_;
  AlignmentStats as;
  trace_ = align_traces(observed_, trace_, &as);
  observed_ = IterationTrace{};
  log("trace of gpu" + std::to_string(device_) + ": " + as.summary());
  VmmPlanOptions po;
  po.chunk_bytes = settings_.gpu.chunk_bytes;
  po.group_bytes = settings_.gpu.group_bytes;
  po.move_persistent = settings_.gpu.move_persistent;
  po.host_resident = settings_.gpu.host_resident;
  // When the live peak fits the budget, nothing moves: the caching allocator reclaims cached
  // segments under pressure (and spills a chunk at worst), which costs less than a round trip of
  // page groups every iteration. Otherwise the plan fills `headroom` of the budget (the allocator
  // needs the rest for chunk rounding and caching).
  bool fits = false;
  {
    VmmPlanOptions probe = po;
    probe.budget = 0;
    const std::uint64_t live_peak = plan_from_trace(trace_, probe).prediction.natural_peak_bytes;
    fits = static_cast<double>(live_peak) <= fits_fraction(settings_) * static_cast<double>(gpu_budget_bytes_);
  }
  po.headroom = vmm_headroom(settings_);
  po.min_tensor_bytes = settings_.gpu.min_move_bytes;
  po.eviction_lag = settings_.gpu.eviction_lag;
  po.device = device_;
  if (settings_.gpu_budget.fraction) {
    po.budget = 0;
    const Plan natural = plan_from_trace(trace_, po);
    gpu_budget_bytes_ = static_cast<std::uint64_t>(*settings_.gpu_budget.fraction *
                                               static_cast<double>(natural.prediction.natural_peak_bytes));
    alloc_->set_device_budget(gpu_budget_bytes_);
    gpu_budget_bytes_ = alloc_->device_budget();
  }
  po.budget = fits && !settings_.gpu_budget.fraction ? 0 : gpu_budget_bytes_;
  plan_ = plan_from_trace(trace_, po);
  plan_.fast_budget_bytes = gpu_budget_bytes_;
  have_plan_ = true;
  if (!settings_.gpu.plan_out.empty()) {
    try {
      write_plan(plan_, settings_.gpu.plan_out);
    } catch (const std::exception& e) {
      log(std::string("could not write the plan: ") + e.what());
    }
  }
  apply_plan_locked();
  live_.clear();
  frames_.clear();
}

void GpuRuntime::apply_plan_locked() {
  std::unordered_map<GroupId, ArenaId> arenas;
  for (const PageGroup& g : plan_.groups) {
    const ArenaId a = alloc_->create_arena("group " + std::to_string(g.id),
                                           g.cls == TensorClass::persistent ? 0 : g.bytes);
    arenas[g.id] = a;
    arena_group_[a] = g.id;
    group_arenas_.push_back(a);
  }
  planned_.assign(static_cast<std::size_t>(planned_allocations_), Planned{});
  for (const TracedTensor& t : trace_.tensors)
    if (t.seq >= 0 && t.seq < planned_allocations_) planned_[static_cast<std::size_t>(t.seq)].bytes = t.bytes;
  std::uint64_t adopted = 0;
  for (const TensorPlacement& p : plan_.placements) {
    if (p.seq >= 0) planned_[static_cast<std::size_t>(p.seq)].arena = arenas.at(p.group);
    else adopted += alloc_->adopt(arenas.at(p.group), reinterpret_cast<const void*>(p.address));
  }
  if (settings_.gpu.verify != Verify::off) {
    std::lock_guard g(diag_m_);
    for (const TracedTensor& t : trace_.tensors) {
      DiagTensor d{t.bytes, t.uses};
      if (t.seq >= 0) diag_seq_[t.seq] = std::move(d);
      else diag_carried_[t.address] = std::move(d);
    }
  }
  if (!plan_.schedule.empty()) {
    mover_->bind_groups(arenas);
    executor_ = std::make_unique<ScheduleExecutor>(*mover_, plan_.schedule);
    executor_->evict_away_at_start(stream_);  // Note [Away when the plan starts]
  }
  for (const std::string& n : plan_.notes) log("plan for gpu" + std::to_string(device_) + ": " + n);
  // Host handles are slow to create: make the ones the evictions need now, off the training thread.
  const std::uint64_t host_need = plan_.prediction.bytes_to_slow;
  if (host_need > 0 && settings_.gpu.prewarm_threads > 0) {
    for (int i = 0; i < settings_.gpu.prewarm_threads; ++i)
      prewarm_.emplace_back([a = alloc_.get(), host_need] {
        try {
          a->prewarm_host(host_need);
        } catch (...) {
          // Evictions create what is missing themselves.
        }
      });
  }
  (void)adopted;
}

// Note [Diverged iterations].
void GpuRuntime::diverge_locked(const std::string& why) {
  if (!phases_.following()) return;
  ++divergences_;
  divergence_ = why;
  const bool give_up = phases_.diverge();
  if (give_up) {
    executor_.reset();
    log(why + ": " + std::to_string(phases_.divergent_streak()) +
        " iterations in a row no longer match the traced one; migrations stop for good and every page group is "
        "brought back to the device where the budget allows (allocations continue under the budget)");
  } else if (divergences_ <= 5) {
    log(why + ": this iteration no longer matches the traced one; migrations pause until it ends and every page "
              "group is brought back to the device where the budget allows" +
        std::string(divergences_ == 5 ? " (further pauses are counted, not logged)" : ""));
  }
  for (ArenaId a : group_arenas_) mover_->prefetch(a, stream_);
}

bool GpuRuntime::iteration() {
  std::lock_guard lk(m_);
  IterationRecord r;
  r.iteration = iteration_;
  r.phase = phases_.phase();
  r.phase_name = phase_name_locked();
  r.events = clock_;
  r.allocations = seq_;
  if (phases_.following() && executor_) {
    executor_->end_iteration(stream_);
    r.log = executor_->take_log();
  }
  if (phases_.following() && seq_ != planned_allocations_)
    diverge_locked("iteration " + std::to_string(iteration_) + " made " + std::to_string(seq_) +
                   " allocations, the traced one " + std::to_string(planned_allocations_));
  r.moves = mover_->take_counters();
  {
    std::lock_guard g(diag_m_);
    for (const std::string& n : rewrite_notes_) log(n);
    rewrite_notes_.clear();
  }
  repair_locked();
  const AllocatorStats st = alloc_->stats();
  r.peak_device_bytes = st.peak_device_handles;
  r.device_bytes_end = st.device_handles;
  r.host_bytes_end = st.segment_bytes[static_cast<int>(Residence::host)];
  r.spilled_chunks = st.spilled_chunks - stats_at_start_.spilled_chunks;
  r.pressure_waits = st.pressure_waits - stats_at_start_.pressure_waits;
  r.pressure_wait_ns = st.pressure_wait_ns - stats_at_start_.pressure_wait_ns;
  r.closed_arena_fallbacks = st.closed_arena_fallbacks - stats_at_start_.closed_arena_fallbacks;
  stats_at_start_ = st;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - iteration_start_).count();
  r.timeline = std::move(timeline_);
  timeline_.clear();
  timeline_stride_ = std::max<std::int64_t>(1, clock_ / 256);  // ~256 samples an iteration
  if (history_.size() >= 256) history_.erase(history_.begin());
  history_.push_back(std::move(r));

  const RunPhase finished = phases_.phase();
  const bool observed = observing_locked();  // the reference iteration comes next
  phases_.end_iteration();  // a suspended plan runs again (Note [Diverged iterations])
  if (observed && !gpu_profile_path(settings_).empty()) {
    try {
      write_profile_locked();
    } catch (const std::exception& e) {
      log(std::string("could not write the profile: ") + e.what());
    }
  }
  if (observed) {
    trace_.clock_end = clock_;
    observed_ = std::move(trace_);
  }
  if (finished == RunPhase::recording && !observed) {
    try {
      finish_trace_locked();
      phases_.follow();
    } catch (const std::exception& e) {
      phases_.turn_off();
      divergence_ = std::string("planning failed: ") + e.what();
      log(divergence_ + "; continuing as a caching allocator under the budget");
    }
  }
  ++iteration_;
  iteration_now_.store(iteration_, std::memory_order_relaxed);
  clock_ = 0;
  seq_ = 0;
  alloc_->reset_peaks();
  iteration_start_ = std::chrono::steady_clock::now();
  if (settings_.gpu.migrate && finished == RunPhase::warmup && iteration_ == settings_.warmup_iterations + 1) {
    phases_.record();
    start_trace_locked();
  }
  if (observed) start_trace_locked();
  // A paused plan brought every group back (Note [Diverged iterations]); those the plan has on the host
  // when an iteration starts leave again before it does (Note [Away when the plan starts]).
  if (finished == RunPhase::suspended && phases_.following() && executor_) executor_->evict_away_at_start(stream_);
  if (phases_.following() && executor_) executor_->begin_iteration(stream_);
  write_stats_locked();
  return observing_locked();
}

std::string GpuRuntime::stats_json() const {
  std::lock_guard lk(m_);
  return stats_json_locked(true);
}

std::string GpuRuntime::stats_path(const std::string& stats_out, int device) {
  return stats_out.empty() ? std::string() : device_sibling_path(stats_out, device, ".json");
}

// Note [GPU statistics file]
// With stats_out set (`tierpack run` always sets it), the statistics are rewritten at the end of
// every iteration, without the residency timelines (kept small: the file is replaced while the run
// goes on), to a temporary name and renamed, so a reader never sees half a file and a run that ends
// without a clean exit (CUDA processes often do) still leaves the last iteration's figures.
void GpuRuntime::write_stats_locked() const {
  const std::string path = stats_path(settings_.stats_out, device_);
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return;  // statistics are best effort: never fail a training step for them
    out << stats_json_locked(false) << '\n';
    if (!out) return;
  }
  std::rename(tmp.c_str(), path.c_str());
  // Note [GPU run statistics], the same way.
  const std::string run_path = run_stats_path(settings_.stats_out, device_);
  try {
    write_run_stats(run_stats_locked(), run_path + ".tmp");
    std::rename((run_path + ".tmp").c_str(), run_path.c_str());
  } catch (const std::exception&) {
    // best effort, as above
  }
}

// Note [GPU run statistics]
// Beside its own statistics the GPU tier writes the run-statistics value the report reads
// (core/run_stats.hpp, docs/report.md: `tierpack report <profile> --run-stats <stats>.gpu<N>.run.json`),
// rewritten with the other file every iteration. Tiers are the runtime's topology (tier 0 gpu<N>,
// tier 1 host), as in the profile profile_out writes, so the two go together. Every planned
// iteration (as with `tierpack run --stats`: warm-up and traced iterations are left out) gives its
// step time, bytes each way (to the fast tier: prefetches) and stalls; the last one (the sampled
// iteration) also gives
//   occupancy  bytes of chunks holding blocks on each tier (segments, cached free blocks included),
//              ~256 samples at allocator events, times from the iteration's start;
//   moves      each move of the schedule as issued (start) and over (end: the first clock tick
//              after the mover finished it, at most ~0.2 ms later; moves still running at the end
//              of the iteration end there);
//   stalls     clock ticks that waited for a prefetch (op = the plan's clock: op index with the op
//              observer, else allocator events).
// Group ids are the runtime planner's (its plan_out file), not a placer plan's.
RunStats GpuRuntime::run_stats_locked() const {
  RunStats s;
  s.source = "tierpack gpu runtime (gpu" + std::to_string(device_) + ")";
  s.fast_budget_bytes = gpu_budget_bytes_;
  s.profile_id = profile_id_;
  const IterationRecord* sampled = nullptr;
  for (const IterationRecord& r : history_) {
    if (r.phase != RunPhase::planned) continue;  // as `tierpack run --stats`: iterations under the plan
    RunIteration it;
    it.index = r.iteration;
    it.step_ns = static_cast<std::uint64_t>(r.seconds * 1e9);
    it.bytes_to_fast = r.moves.bytes_to_device;
    it.bytes_to_slow = r.moves.bytes_to_host;
    it.stalls = static_cast<std::uint32_t>(r.moves.stalls);
    it.stall_ns = static_cast<std::uint64_t>(r.moves.stall_ns);
    s.iterations.push_back(it);
    sampled = &r;
  }
  if (!sampled) return s;
  s.sampled_iteration = sampled->iteration;
  for (const TimelineSample& t : sampled->timeline) {
    s.occupancy.push_back({t.t_ns, kGpuTier, t.segment_bytes[static_cast<int>(Residence::device)]});
    s.occupancy.push_back({t.t_ns, kHostTier, t.segment_bytes[static_cast<int>(Residence::host)]});
  }
  for (const ExecutedMove& e : sampled->log.moves) {
    MeasuredMove m;
    m.group = e.move.group;
    m.kind = e.move.kind;
    const bool out = e.move.kind == MoveKind::evict;
    m.from = out ? kGpuTier : kHostTier;
    m.to = out ? kHostTier : kGpuTier;
    m.bytes = e.move.bytes;
    m.start_ns = e.start_ns;
    m.end_ns = std::max(e.end_ns, e.start_ns);
    s.moves.push_back(m);
  }
  for (const ExecutedStall& st : sampled->log.stalls)
    s.stalls.push_back({static_cast<OpIndex>(st.clock), st.group, st.start_ns, st.duration_ns});
  return s;
}

std::string GpuRuntime::run_stats_path(const std::string& stats_out, int device) {
  return stats_out.empty() ? std::string() : device_sibling_path(stats_out, device, ".run.json");
}

std::string GpuRuntime::stats_json_locked(bool timelines) const {
  using nlohmann::json;
  const AllocatorStats st = alloc_->stats();
  json j;
  j["device"] = device_;
  j["backend"] = backend_->info().name;
  j["device_name"] = backend_->info().device_name;
  j["budget"] = gpu_budget_bytes_;
  {
    std::lock_guard g(diag_m_);
    const char* mode = settings_.gpu.verify == Verify::all         ? "all"
                       : settings_.gpu.verify == Verify::sampled   ? "sampled"
                       : settings_.gpu.verify == Verify::evictions ? "evictions"
                                                              : "off";
    j["verify"] = {{"mode", mode},
                   {"rewrites", rewrite_reports_},
                   {"repairs", repairs_}};
  }
  j["chunk"] = settings_.gpu.chunk_bytes;
  j["remap"] = {{"when", settings_.gpu.remap_when == RemapWhen::idle ? "idle" : "eager"},
                {"max_delay_ms", settings_.gpu.remap_max_delay.count()},
                {"copy_piece", settings_.gpu.copy_piece},
                {"gate", settings_.gpu.gate}};
  j["spill"] = settings_.gpu.spill;
  j["phase"] = phase_name_locked();
  j["iteration"] = iteration_;
  j["divergence"] = divergence_;
  j["divergences"] = divergences_;
  j["allocator"] = {{"allocated", st.allocated},
                    {"streams", alloc_->streams().size()},  // the streams held at remap gates
                    {"peak_allocated", st.peak_allocated},
                    {"requested", st.requested},
                    {"device_bytes", st.device_handles},
                    {"peak_device_bytes", st.peak_device_handles},
                    {"host_handle_bytes", st.host_handles},
                    {"segment_device_bytes", st.segment_bytes[0]},
                    {"segment_host_bytes", st.segment_bytes[1]},
                    {"allocations", st.allocations},
                    {"frees", st.frees},
                    {"segments_created", st.segments_created},
                    {"segments_reclaimed", st.segments_reclaimed},
                    {"cross_stream_reuses", st.cross_stream_reuses},
                    {"spilled_chunks", st.spilled_chunks},
                    {"pressure_waits", st.pressure_waits},
                    {"pressure_wait_ms", st.pressure_wait_ns / 1e6},
                    {"closed_arena_fallbacks", st.closed_arena_fallbacks},
                    {"out_of_memory", st.out_of_memory}};
  if (have_plan_) {
    json notes = json::array();
    for (const auto& n : plan_.notes) notes.push_back(n);
    j["plan"] = {{"groups", plan_.groups.size()},
                 {"moves", plan_.schedule.size()},
                 {"bytes_to_host", plan_.prediction.bytes_to_slow},
                 {"bytes_to_device", plan_.prediction.bytes_to_fast},
                 {"natural_peak", plan_.prediction.natural_peak_bytes},
                 {"predicted_peak", plan_.prediction.fast_peak_bytes},
                 {"traced_allocations", planned_allocations_},
                 {"notes", notes}};
  }
  json its = json::array();
  for (const IterationRecord& r : history_) {
    json tl = json::array();
    if (timelines)
      for (const TimelineSample& s : r.timeline) tl.push_back({s.clock, s.device_bytes});
    its.push_back({{"iteration", r.iteration},
                   {"phase", r.phase_name},
                   {"events", r.events},
                   {"allocations", r.allocations},
                   {"seconds", r.seconds},
                   {"bytes_to_host", r.moves.bytes_to_host},
                   {"bytes_to_device", r.moves.bytes_to_device},
                   {"evictions", r.moves.evictions},
                   {"prefetches", r.moves.prefetches},
                   {"chunks_remapped", r.moves.chunks_remapped},
                   {"stalls", r.moves.stalls},
                   {"stall_ms", r.moves.stall_ns / 1e6},
                   {"misses", r.moves.misses},
                   {"failures", r.moves.failures},
                   {"remap_ms", r.moves.remap_ns / 1e6},
                   {"gates", r.moves.gates},
                   {"gate_wait_ms", r.moves.gate_wait_ns / 1e6},
                   {"gate_hold_ms", r.moves.gate_hold_ns / 1e6},
                   {"gate_timeouts", r.moves.gate_timeouts},
                   {"busy_gates", r.moves.busy_gates},
                   {"verified_chunks", r.moves.verified_chunks},
                   {"rewrites", r.moves.rewrites},
                   {"verify_ms", r.moves.verify_ns / 1e6},
                   {"peak_device_bytes", r.peak_device_bytes},
                   {"device_bytes_end", r.device_bytes_end},
                   {"host_bytes_end", r.host_bytes_end},
                   {"spilled_chunks", r.spilled_chunks},
                   {"pressure_waits", r.pressure_waits},
                   {"pressure_wait_ms", r.pressure_wait_ns / 1e6},
                   {"closed_arena_fallbacks", r.closed_arena_fallbacks},
                   {"timeline", tl}});
  }
  j["iterations"] = its;
  return j.dump();
}

}  // namespace tierpack::gpu
