// RunController and RunMemory (see run_controller.hpp).
#include "runtime/host/run_controller.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/file_envelope.hpp"
#include "core/input_file.hpp"
#include "core/tier_spec.hpp"
#include "core/units.hpp"
#include "placer/planner.hpp"
#include "platform/host_os.hpp"

namespace tierpack {
namespace {

std::uint64_t since_ns(std::chrono::steady_clock::time_point t0) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}

/// The op index of each thread's open ops (op begin/end pairs nest per thread).
thread_local std::vector<std::int32_t> t_open_ops;

/// Pages per NUMA node (or -errno) of the page-aligned ranges, through move_pages(nodes = NULL).
void count_nodes(host::HostOs& os, const std::vector<std::pair<std::uintptr_t, std::uintptr_t>>& ranges,
                 std::map<int, std::uint64_t>& out) {
  const std::uintptr_t page = os.page_size();
  std::vector<void*> pages;
  for (const auto& [b, e] : ranges)
    for (std::uintptr_t p = b & ~(page - 1); p < e; p += page) pages.push_back(reinterpret_cast<void*>(p));
  std::sort(pages.begin(), pages.end());
  pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
  constexpr std::size_t kBatch = 4096;
  std::vector<int> status;
  for (std::size_t i = 0; i < pages.size(); i += kBatch) {
    const std::size_t n = std::min(kBatch, pages.size() - i);
    status.assign(n, 0);
    if (os.move_pages(std::span<void* const>(pages.data() + i, n), {}, status) != 0) continue;
    for (int s : status) ++out[s];
  }
}

std::string node_counts_text(const std::map<int, std::uint64_t>& m, std::uint64_t page) {
  std::string s;
  for (const auto& [node, n] : m) {
    if (!s.empty()) s += ", ";
    s += node >= 0 ? "node " + std::to_string(node) : "errno " + std::to_string(-node);
    s += ": " + std::to_string(n) + " pages (" + format_bytes(n * page) + ")";
  }
  return s.empty() ? "no pages" : s;
}

/// The plan file, read into a vector (a stringstream here once crashed in jemalloc's sized delete: Note
/// [jemalloc loaded privately] in platform/jemalloc.cpp has the cause, now gone); the file is opened and
/// bounded like every input (Note [Bounded reads]).
Plan read_plan_here(const std::string& path) {
  InputFile in(path, kMaxJsonFileBytes);
  std::vector<char> text;
  char buf[65536];
  for (std::size_t n; (n = in.read_some(buf, sizeof buf)) > 0;) {
    text.insert(text.end(), buf, buf + n);
    if (text.size() > kMaxJsonFileBytes)
      throw format_error(path + ": grew past the size tierpack reads while being read");
  }
  return parse_plan(std::string_view(text.data(), text.size()), path);
}

}  // namespace

// ---- RunMemory --------------------------------------------------------------------------------------

std::string_view RunMemory::name() const {
  return runtime_.load(std::memory_order_acquire) ? "host-runtime" : "profiling-arena";
}

void* RunMemory::allocate(std::size_t bytes) noexcept {
  if (host::HostRuntime* rt = runtime_.load(std::memory_order_acquire)) {
    try {
      void* p = rt->allocate(bytes);
      allocations_.fetch_add(1, std::memory_order_relaxed);
      return p;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tierpack: host runtime: %s\n", e.what());
      return nullptr;
    }
  }
  if (!arena_) return nullptr;
  void* p = arena_->allocate(bytes);
  if (p) allocations_.fetch_add(1, std::memory_order_relaxed);
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uintptr_t low = arena_low_.load(std::memory_order_relaxed);
  while (p && (low == 0 || a < low) && !arena_low_.compare_exchange_weak(low, a, std::memory_order_relaxed)) {
  }
  return p;
}

namespace {
bool runtime_owns(host::HostRuntime* rt, const void* p) noexcept {
  if (!rt) return false;
  try {
    return rt->allocator().lookup(p).has_value();
  } catch (...) {
    return false;
  }
}
}  // namespace

void RunMemory::deallocate(void* p) noexcept {
  if (arena_ && arena_->owns(p)) {
    if (host::HostRuntime* rt = adopter_.load(std::memory_order_acquire)) rt->forget(p);
    arena_->deallocate(p);
    return;
  }
  host::HostRuntime* prev = previous_.load(std::memory_order_acquire);
  if (runtime_owns(prev, p)) {
    prev->deallocate(p);
  } else if (host::HostRuntime* rt = runtime_.load(std::memory_order_acquire)) {
    rt->deallocate(p);
  }
}

bool RunMemory::owns(const void* p) const noexcept {
  if (arena_ && arena_->owns(p)) return true;
  return runtime_owns(runtime_.load(std::memory_order_acquire), p) ||
         runtime_owns(previous_.load(std::memory_order_acquire), p);
}

// ---- RunController ----------------------------------------------------------------------------------

std::shared_ptr<RunController> RunController::attach(Session& session, const Config& config) {
  std::unique_ptr<ProfilingArena> arena;
  if (config.plan_in.empty()) {
    try {
      arena = std::make_unique<ProfilingArena>();
    } catch (const std::exception& e) {
      session.log(std::string("no profiling arena (") + e.what() + "): CPU tensors get no page data");
    }
  }
  auto memory = std::make_unique<RunMemory>(std::move(arena));
  auto controller = std::make_shared<RunController>(session, config, memory.get());
  const bool have_arena = memory->arena() != nullptr;
  session.set_host_memory(std::move(memory));
  session.add_listener(controller);
  if (!config.plan_in.empty()) {
    Plan plan = read_plan_here(config.plan_in);
    if (plan.device >= 0)
      throw logic_error(config.plan_in + " places GPU " + std::to_string(plan.device) +
                        " tensors; tierpack run applies host plans (make one with --device host)");
    session.log("run: plan " + config.plan_in + " applies from iteration 0 (no profiling)");
    controller->install_plan(std::move(plan));
    controller->apply_from_ = 0;
  } else {
    if (!have_arena) {
      // Nothing to profile into: the runtime serves every tensor on the fast tier until the plan.
      controller->runtime_ = std::make_unique<host::HostRuntime>(config, Topology{});
      controller->memory_->install(controller->runtime_.get());
    }
    const int w = config.warmup_iterations;
    const int last = w + config.profile_iterations - 1;
    session.log("run: warm-up " + std::to_string(w) + " iteration(s), profiling iteration" +
                (last > w ? "s " + std::to_string(w) + ".." + std::to_string(last) : " " + std::to_string(w)) +
                ", then the plan applies; fast budget " +
                (config.fast_budget.is_set() ? config.fast_budget.to_string() : std::string("unlimited")) + "; tiers " +
                (config.tiers.empty() ? std::string("of this machine") : config.tiers));
    if (w == 0) session.log("profiling iteration 0");
  }
  controller->iter_start_ = std::chrono::steady_clock::now();
  return controller;
}

RunController::RunController(Session& session, Config config, RunMemory* memory)
    : session_(session), config_(std::move(config)), memory_(memory) {}

std::string RunController::plan_path() const {
  if (config_.profile_out.empty()) return {};
  std::filesystem::path p(config_.profile_out);
  return p.replace_extension().string() + ".plan.json";
}

Topology RunController::runtime_topology(const Plan& plan) {
  Topology t = plan.topology;
  const int nodes = host::system_os().node_count();
  for (Tier& tier : t.tiers) {
    if (tier.kind != TierKind::host_dram && tier.kind != TierKind::far_memory) continue;
    if (tier.numa_node >= 0 && tier.numa_node < nodes) continue;
    emulated_.push_back(tier.name + " (NUMA node " + std::to_string(tier.numa_node) + ")");
    tier.numa_node = 0;
  }
  return t;
}

std::int64_t RunController::late_allocations(IterationSource source, const Profile* profile, std::int32_t ended) {
  if (source != IterationSource::periodicity) return 0;
  std::uint64_t boundary = next_boundary_;
  if (profile) {
    boundary = 0;
    for (const IterationInfo& it : profile->iterations) {
      if (it.index <= ended) boundary += it.allocations;
      if (it.index == profile->meta.profiled_iteration) period_ = it.allocations;
    }
  }
  if (period_ == 0) return 0;
  next_boundary_ = boundary + period_;
  const std::uint64_t now = memory_->allocations();
  // Lost track (an allocation the recorder did not count): start at 0; the runtime notices a mismatch.
  if (now < boundary || now - boundary >= period_) return 0;
  return static_cast<std::int64_t>(now - boundary);
}

bool RunController::plan_from_profile(std::int32_t ended, IterationSource source) {
  try {
    Profile profile = session_.recorder()->snapshot();
    TierModel model = config_.tiers.empty() ? profile.topology : load_tier_model(config_.tiers);
    if (model.of_kind(TierKind::host_dram).empty() && model.of_kind(TierKind::far_memory).empty())
      throw logic_error("the tier model has no host tier");
    placer::PlanOptions opts;
    opts.device = -1;
    opts.fast_budget = config_.fast_budget;
    Plan plan = placer::make_plan(profile, model, opts);
    const auto& pr = plan.prediction;
    std::uint64_t to_slow = 0, to_fast = 0;
    for (const Move& m : plan.schedule) (m.kind == MoveKind::evict ? to_slow : to_fast) += m.bytes;
    session_.log("plan: " + std::to_string(plan.groups.size()) + " page groups, " +
                 std::to_string(plan.schedule.size()) + " moves per iteration (" + format_bytes(to_slow) +
                 " to the slow tier, " + format_bytes(to_fast) + " back); fast-tier peak " +
                 format_bytes(pr.fast_peak_bytes) + " of " + format_bytes(pr.natural_peak_bytes) + ", budget " +
                 format_bytes(plan.fast_budget_bytes) + (plan.empty() ? "; nothing to move" : ""));
    for (const auto& n : plan.notes) session_.log("plan note: " + n);
    if (const std::string path = plan_path(); !path.empty()) {
      write_plan(plan, path);
      session_.log("plan written to " + path);
    }
    install_plan(std::move(plan), late_allocations(source, &profile, ended));
    apply_from_ = ended + 1;
    session_.log("applying plan from iteration " + std::to_string(apply_from_));
    return true;
  } catch (const std::exception& e) {
    plan_error_ = e.what();
    session_.log("plan: error: " + plan_error_ + " (training goes on without a plan)");
    return false;
  }
}

void RunController::install_plan(Plan plan, std::int64_t first_seq) {
  const Topology topo = runtime_topology(plan);
  auto rt = std::make_unique<host::HostRuntime>(config_, topo);
  rt->set_plan(plan);
  plan_ = std::move(plan);
  // A runtime without a plan (no profiling arena) keeps taking back its blocks through RunMemory:
  // released, never destroyed (tensors from it may live to the end of the process).
  (void)runtime_.release();
  runtime_ = std::move(rt);
  settle_arena_tensors(plan_);
  for (const auto& e : emulated_)
    session_.log("tier " + e + " is not on this machine: emulated on node 0 (budget and moves are enforced and "
                 "counted, pages stay on node 0)");
  session_.log(runtime_->plan_summary());
  memory_->install(runtime_.get());
  applying_.store(true);
  follow_ops_.store(!plan_.empty());
  next_op_.store(0);
  runtime_->begin_iteration(first_seq);
}

void RunController::settle_arena_tensors(const Plan& plan) {
  ProfilingArena* arena = memory_->arena();
  if (!arena || plan.fast_tier == kNoTier) return;
  std::vector<host::ForeignTensor> tensors;
  for (const TensorPlacement& p : plan.placements) {
    if (p.seq >= 0 || p.address == 0 || p.bytes == 0 || !arena->owns(reinterpret_cast<void*>(p.address))) continue;
    tensors.push_back({p.address, p.bytes, p.group});
  }
  if (tensors.empty()) return;
  memory_->set_adopter(runtime_.get());
  const std::size_t adopted = runtime_->adopt(tensors);
  runtime_->mover().wait_idle();  // their groups' first moves home: the plan starts from there
  const TierId fast = runtime_->fast_tier();
  const auto slow = runtime_->slow_tier();
  arena_fast_bytes_ = runtime_->foreign().bytes_on(fast);
  arena_moved_bytes_ = slow && *slow != fast ? runtime_->foreign().bytes_on(*slow) : 0;
  const host::MoveCounters moved = runtime_->mover().take_counters();  // not the first iteration's
  const std::uint64_t budget = runtime_->allocator().usage(fast).budget;
  session_.log("tensors from before the plan (profiling arena): " + std::to_string(adopted) + " follow their page "
               "groups' moves; " + format_bytes(arena_fast_bytes_) + " on the fast tier, " +
               format_bytes(arena_moved_bytes_) + " on the slow tier (" + moved.summary() + ")" +
               (budget ? "; fast budget " + format_bytes(budget) + " including them" : std::string()));
}

void RunController::sample(std::uint64_t t_ns) {
  // mu_ held
  host::HostArenaAllocator& alloc = runtime_->allocator();
  auto add = [&](TierId t, std::uint64_t extra) {
    const std::uint64_t bytes = alloc.usage(t).resident + extra;
    for (auto it = occ_now_.rbegin(); it != occ_now_.rend(); ++it)
      if (it->tier == t) {
        if (it->bytes == bytes) return;
        break;
      }
    occ_now_.push_back({t_ns, t, bytes});
  };
  // Tensors from before the plan are in the allocator's resident bytes (Note [Tensors from before the plan]).
  add(runtime_->fast_tier(), 0);
  if (auto s = runtime_->slow_tier(); s && *s != runtime_->fast_tier()) add(*s, 0);
}

void RunController::check_arena_move(std::int32_t iteration, const Move& m) {
  const auto entries = runtime_->foreign().group_entries(m.group);
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;
  for (const auto& e : entries)
    if (e.pages.bytes() > 0) ranges.emplace_back(e.pages.begin, e.pages.end);
  if (ranges.empty()) return;
  host::HostArenaAllocator& alloc = runtime_->allocator();
  std::map<int, std::uint64_t> nodes;
  count_nodes(alloc.os(), ranges, nodes);
  ArenaMoveCheck c;
  c.iteration = iteration;
  c.group = m.group;
  c.kind = m.kind;
  c.node = alloc.node_of(m.to);
  for (const auto& [node, n] : nodes) (node == c.node ? c.pages_on_node : node >= 0 ? c.pages_elsewhere : c.pages_absent) += n;
  arena_checks_.push_back(c);
}

void RunController::on_op_begin(std::string_view, Phase) noexcept {
  if (!follow_ops_.load(std::memory_order_relaxed)) return;
  const std::int32_t op = next_op_.fetch_add(1, std::memory_order_relaxed);
  try {
    t_open_ops.push_back(op);
  } catch (...) {
    return;
  }
  runtime_->on_op_begin(op);
}

void RunController::on_op_end(std::string_view) noexcept {
  if (!follow_ops_.load(std::memory_order_relaxed) || t_open_ops.empty()) return;
  const std::int32_t op = t_open_ops.back();
  t_open_ops.pop_back();
  try {
    std::lock_guard lock(mu_);
    // Before this op's moves are issued: a move over by now is seen where it left the pages.
    if (iteration_now_ == apply_from_) check_arena_moves(runtime_->execution_log_so_far());
  } catch (...) {
  }
  runtime_->on_op_end(op);
  try {
    std::lock_guard lock(mu_);
    sample(since_ns(iter_start_));
  } catch (...) {
  }
}

// Where the tensors from before the plan are when a move of their group is over, in the first planned
// iteration: at each op end, before the op's moves are issued (the moves seen over since the last), and at
// the iteration's end. Only a move that is still its group's latest one when seen over: a later move of the
// group may be taking the pages on.
void RunController::check_arena_moves(const ExecutionLog& log) {
  // mu_ held
  seen_over_.resize(log.moves.size(), false);
  for (std::size_t i = 0; i < log.moves.size(); ++i) {
    const ExecutedMove& e = log.moves[i];
    if (seen_over_[i] || !e.done) continue;
    seen_over_[i] = true;
    const bool latest = std::none_of(log.moves.begin() + static_cast<std::ptrdiff_t>(i) + 1, log.moves.end(),
                                     [&](const ExecutedMove& later) { return later.move.group == e.move.group; });
    if (latest) check_arena_move(iteration_now_, e.move);
  }
}

// The moves of the iteration are the schedule executor's log (HostRuntime::take_execution_log): each move
// the runtime issued, from the end of the op it was due after (the moves due before the iteration: from the
// iteration's start) to the first op begin after the mover finished it (the executor asks the mover at op
// begins, at most every 0.2 ms), or to the iteration's end (step_ns) when it was still moving. Tiers are
// the runtime's, which are the plan's (runtime_topology keeps their ids, HostRuntime::set_plan maps by name).
// The two clocks differ: the executor's starts in HostRuntime::begin_iteration (begin_op_iteration), which
// on_iteration calls before it takes iter_start_ (install_plan too, before plan_from_profile returns), so
// the log's times run ahead of the controller's by that gap, microseconds. They are put on the controller's
// clock, the one of step_ns and the occupancy samples: minus the gap; a move issued in the gap (those due
// before the iteration) starts at 0.
std::vector<MeasuredMove> RunController::take_moves(std::int32_t ended, std::uint64_t step_ns) {
  // mu_ held
  const ExecutionLog log = runtime_->take_execution_log();
  const std::int64_t ahead = std::chrono::duration_cast<std::chrono::nanoseconds>(iter_start_ - log.began).count();
  auto ours = [&](std::uint64_t t) {
    return std::min(static_cast<std::uint64_t>(std::max<std::int64_t>(static_cast<std::int64_t>(t) - ahead, 0)),
                    step_ns);
  };
  std::vector<MeasuredMove> moves;
  moves.reserve(log.moves.size());
  for (const ExecutedMove& e : log.moves) {
    const Move& m = e.move;
    const std::uint64_t start = ours(e.start_ns);
    moves.push_back({m.group, m.kind, m.from, m.to, m.bytes, start, std::max(ours(e.end_ns), start)});
  }
  if (ended == apply_from_) check_arena_moves(log);
  seen_over_.clear();
  return moves;
}

void RunController::on_iteration(std::int32_t ended, IterationSource source) noexcept {
  try {
    std::lock_guard lock(mu_);
    RunIterationRecord rec;
    rec.index = ended;
    rec.step_ns = since_ns(iter_start_);
    if (applying_.load() && ended >= apply_from_) {
      runtime_->end_iteration();
      rec.planned = true;
      rec.stats = runtime_->last_iteration();
      std::vector<MeasuredMove> moves = take_moves(ended, rec.step_ns);
      if (!moves.empty() || !occ_now_.empty()) {
        occ_last_.swap(occ_now_);
        moves_last_ = std::move(moves);
        sampled_ = ended;
      }
      occ_now_.clear();
      if (!rec.stats.divergence.empty())
        session_.log("iteration " + std::to_string(ended) + " left the plan: " + rec.stats.divergence);
    }
    iterations_.push_back(rec);
  } catch (...) {
  }
  if (!applying_.load() && plan_error_.empty()) {
    EventRecorder* rec = session_.recorder();
    // The session itself says "recording iteration N" when the profiled iterations begin.
    if (rec && rec->profile_ready()) plan_from_profile(ended, source);
  } else if (applying_.load()) {
    next_op_.store(0, std::memory_order_relaxed);
    t_open_ops.clear();
    runtime_->begin_iteration(late_allocations(source, nullptr, ended));
  }
  std::lock_guard lock(mu_);
  iter_start_ = std::chrono::steady_clock::now();
  iteration_now_ = ended + 1;
}

void RunController::on_finish() noexcept {
  if (finished_.exchange(true)) return;
  try {
    if (runtime_) runtime_->mover().wait_idle();
    for (const RunIterationRecord& r : iterations_) {
      std::string line = "iteration " + std::to_string(r.index) + ": " + format_duration_ns(double(r.step_ns));
      if (!r.planned) {
        const bool profiling = config_.plan_in.empty() && r.index < config_.warmup_iterations + config_.profile_iterations;
        line += r.index < config_.warmup_iterations && config_.plan_in.empty() ? " (warm-up)"
                : profiling                                                   ? " (profiling)"
                : r.index < apply_from_                                         ? " (before the plan)"
                                                                              : " (no plan)";
      } else {
        const auto& s = r.stats;
        line += ", " + std::to_string(s.allocations) + " allocations (" + std::to_string(s.planned) + " planned, " +
                std::to_string(s.unplanned) + " default, " + std::to_string(s.mismatched) + " mismatched, " +
                std::to_string(s.fallbacks) + " budget fallback(s)), fast peak " + format_bytes(s.fast_peak) +
                "; " + s.moves.summary();
        if (!s.had_plan) line += "; the plan was off";
        if (!s.divergence.empty()) line += "; left the plan: " + s.divergence;
      }
      session_.log(line);
    }
    if (runtime_) {
      const std::uint64_t page = runtime_->allocator().os().page_size();
      std::map<int, std::uint64_t> rt_nodes, arena_nodes;
      const bool arena = residency_at_exit(rt_nodes, arena_nodes);
      session_.log("residency at exit (move_pages): runtime blocks: " + node_counts_text(rt_nodes, page));
      if (arena) session_.log("residency at exit (move_pages): profiling arena: " + node_counts_text(arena_nodes, page));
    }
  } catch (const std::exception& e) {
    session_.log(std::string("run summary failed: ") + e.what());
  }
  write_stats();
}

bool RunController::residency_at_exit(std::map<int, std::uint64_t>& runtime_nodes,
                                      std::map<int, std::uint64_t>& arena_nodes) {
  host::HostArenaAllocator& alloc = runtime_->allocator();
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;
  alloc.for_each([&](const host::AllocationInfo& i) {
    const auto b = reinterpret_cast<std::uintptr_t>(i.base);
    ranges.emplace_back(b, b + i.usable);
  });
  count_nodes(alloc.os(), ranges, runtime_nodes);
  if (!memory_->arena() || !memory_->arena_low()) return false;
  const auto ext = memory_->arena()->extent_of(memory_->arena_low());
  if (!ext) return false;
  count_nodes(alloc.os(), {*ext}, arena_nodes);
  return true;
}

void RunController::write_stats() noexcept {
  if (config_.stats_out.empty()) return;
  try {
    RunStats s;
    s.source = "tierpack run";
    s.profile_id = plan_.profile_id;  // the applied plan's profile (Note [Profile identity])
    s.fast_budget_bytes = plan_.fast_budget_bytes;
    s.sampled_iteration = sampled_;
    s.stall_ns_measured = false;  // the host runtime never waits for a move (Note [Run counters])
    nlohmann::json extra = nlohmann::json::array();
    // What the final line of `tierpack run` says (Note [What the run summary says] in run_controller.hpp).
    int followed = 0, under_plan = 0, off_at = -1;
    std::string off_why;
    for (const RunIterationRecord& r : iterations_) {
      if (!r.planned) continue;
      ++under_plan;
      if (r.stats.followed()) ++followed;
      if (r.stats.turned_off && off_at < 0) off_at = r.index, off_why = r.stats.divergence;
    }
    for (const RunIterationRecord& r : iterations_) {
      if (r.planned) {
        RunIteration it;
        it.index = r.index;
        it.step_ns = r.step_ns;
        it.bytes_to_fast = r.stats.moves.bytes_to_fast;
        it.bytes_to_slow = r.stats.moves.bytes_to_slow;
        it.stalls = static_cast<std::uint32_t>(r.stats.moves.moves_late);  // Note [Run counters]
        it.budget_fallbacks = r.stats.fallbacks;
        it.fast_peak_bytes = r.stats.fast_peak;
        s.iterations.push_back(it);
      }
      nlohmann::json moves;
      host::to_json(moves, r.stats.moves);
      extra.push_back({{"index", r.index},
                       {"step_ns", r.step_ns},
                       {"planned", r.planned},
                       {"allocations", r.stats.allocations},
                       {"routed_by_plan", r.stats.planned},
                       {"default_class", r.stats.unplanned},
                       {"mismatched", r.stats.mismatched},
                       {"over_budget", r.stats.fallbacks},
                       {"fast_peak_bytes", r.stats.fast_peak},
                       {"moves", moves},
                       {"divergence", r.stats.divergence},
                       {"plan_followed", r.planned && r.stats.followed()},
                       {"plan_turned_off", r.planned && r.stats.turned_off}});
    }
    s.occupancy = occ_last_;
    s.emulated_tiers = emulated_;
    s.moves = moves_last_;
    nlohmann::json j = s;
    nlohmann::json run = {{"iterations", extra},
                          {"apply_from", apply_from_},
                          {"plan_applied", applying_.load()},
                          {"plan_error", plan_error_},
                          {"iterations_under_plan", under_plan},
                          {"iterations_followed", followed},
                          {"plan_turned_off_at", off_at},
                          {"plan_turned_off_why", off_why},
                          {"profile_id", plan_.profile_id},
                          {"plan_file", config_.plan_in.empty() ? plan_path() : config_.plan_in},
                          {"emulated_tiers", emulated_},
                          {"arena_fast_bytes", arena_fast_bytes_},
                          {"arena_slow_bytes", arena_moved_bytes_}};
    nlohmann::json checks = nlohmann::json::array();
    for (const ArenaMoveCheck& c : arena_checks_)
      checks.push_back({{"iteration", c.iteration},
                        {"group", c.group},
                        {"kind", c.kind == MoveKind::evict ? "evict" : "prefetch"},
                        {"node", c.node},
                        {"pages_on_node", c.pages_on_node},
                        {"pages_elsewhere", c.pages_elsewhere},
                        {"pages_absent", c.pages_absent}});
    run["arena_move_checks"] = checks;
    if (runtime_) {
      std::map<int, std::uint64_t> rt_nodes, arena_nodes;
      residency_at_exit(rt_nodes, arena_nodes);
      auto to_obj = [](const std::map<int, std::uint64_t>& m) {
        nlohmann::json o = nlohmann::json::object();
        for (const auto& [k, v] : m) o[std::to_string(k)] = v;
        return o;
      };
      run["residency_pages"] = {{"runtime", to_obj(rt_nodes)}, {"profiling_arena", to_obj(arena_nodes)}};
      run["fast_tier"] = runtime_->fast_tier();
      run["arena_tensors_carried_at_exit"] = runtime_->foreign().size();
      if (auto st = runtime_->slow_tier()) run["slow_tier"] = *st;
    }
    j["tierpack_run"] = run;
    write_file_atomic(config_.stats_out, j.dump(1) + "\n");
    session_.log("run statistics written to " + config_.stats_out);
  } catch (const std::exception& e) {
    session_.log(std::string("run statistics not written: ") + e.what());
  }
}

}  // namespace tierpack
