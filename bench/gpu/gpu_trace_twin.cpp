// A GPU runtime profile (TIERPACK_GPU profile_out, e.g. GPT-2 large on the H200) replayed through the
// GPU runtime on the memfd twin, scaled down: the same allocations, frees and ops in the same order,
// iteration after iteration, so the runtime traces, plans and moves page groups as it did on the GPU,
// without a GPU. Sizes are divided by --scale (the budget, chunk, group and min_move sizes with them).
// Ops are twin work items that sleep their recorded duration divided by --time-scale, and check the
// first words of every tensor they touch against what was written at its allocation (a byte lost by a
// move shows as a mismatch). Prints one line per iteration with the runtime's counters: bytes moved,
// misses, allocations that waited for evictions, chunks spilled to host memory, the device peak.
//   build/bench/gpu/gpu_trace_twin run.tpk --budget 60% [--scale 64] [--iterations 8] [--time-scale 0]
//       [--gpu 'evict_lag:4,...'] [--context 0.67G] [--explain] [--max-spilled N] [--max-fallbacks N]
// --explain: at the first spill of each planned iteration, where the device memory is (groups, the
// default arena, what the plan put there; needs --gpu plan_out:FILE for the last part), and the first
// allocations that found their group closed. --max-spilled / --max-fallbacks: exit 3 when a planned
// iteration spilled more chunks, or put more tensors of closed groups in the default arena (a test).
// --time-scale makes ops sleep their recorded time divided by it; this thread does not wait for them,
// so the twin's stream falls behind by up to an iteration (more than a GPU's), and spilled chunks,
// released only once the stream has passed their last use, can exhaust the host limit.
// --budget is the GPU budget as gpt2_bench gives it (a size, or a percentage of the profile's peak),
// less --context (the CUDA context, which holds part of a real budget): the runtime's allocator budget.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "alloc/gpu/memfd_backend.hpp"
#include "core/error.hpp"
#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/units.hpp"
#include "runtime/gpu/gpu_runtime.hpp"
#include "runtime/gpu/gpu_runtime_options.hpp"

namespace {

using namespace tierpack;
using namespace tierpack::gpu;

constexpr std::size_t kCheckWords = 8;

std::uint64_t word_of(std::uint64_t tag, std::size_t i) { return tag * 0x9E3779B97F4A7C15ull + i + 1; }

struct Event {
  std::uint64_t ns = 0;
  int kind = 0;  // 0 allocate, 1 op, 2 free (in this order at equal times)
  std::uint32_t index = 0;
  bool operator<(const Event& o) const { return std::tie(ns, kind, index) < std::tie(o.ns, o.kind, o.index); }
};

struct Args {
  std::string profile, budget = "60%", gpu;
  double scale = 64, time_scale = 0;
  int iterations = 8;
  std::uint64_t context = 0;
  bool explain = false;
  long max_spilled = -1, max_fallbacks = -1;  // per planned iteration; -1: not checked
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "gpu_trace_twin: %s\nusage: gpu_trace_twin PROFILE.tpk [--budget 60%%|24G] [--scale 64] "
               "[--iterations 8] [--time-scale 0] [--gpu OPTS] [--context 0.67G] [--explain] [--max-spilled N] "
               "[--max-fallbacks N]\n",
               why.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(k + " needs a value");
      return argv[++i];
    };
    auto number = [&](const std::string& v) {
      char* end = nullptr;
      const double d = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end || !(d >= 0)) usage("not a number for " + k + ": '" + v + "'");
      return d;
    };
    if (k == "--budget")
      a.budget = value();
    else if (k == "--scale")
      a.scale = number(value());
    else if (k == "--time-scale")
      a.time_scale = number(value());
    else if (k == "--iterations")
      a.iterations = static_cast<int>(number(value()));
    else if (k == "--gpu")
      a.gpu = value();
    else if (k == "--context")
      a.context = parse_bytes(value());
    else if (k == "--explain")
      a.explain = true;
    else if (k == "--max-spilled")
      a.max_spilled = static_cast<long>(number(value()));
    else if (k == "--max-fallbacks")
      a.max_fallbacks = static_cast<long>(number(value()));
    else if (!k.empty() && k[0] == '-')
      usage("unknown option " + k);
    else
      a.profile = k;
  }
  if (a.profile.empty()) usage("no profile given");
  if (a.scale < 1) usage("--scale must be >= 1");
  if (a.iterations < 1) usage("--iterations must be >= 1");
  return a;
}

class Replay {
 public:
  struct Live {
    void* p = nullptr;
    std::size_t words = 0, bytes = 0;
    std::uint64_t tag = 0;
  };

  Replay(const Profile& p, double scale, double time_scale, bool explain, std::string plan_out)
      : p_(p), scale_(scale), time_scale_(time_scale), explain_(explain), plan_out_(std::move(plan_out)) {
    for (const TensorRecord& t : p_.tensors) {
      if (t.seq >= 0) events_.push_back({t.birth_ns, 0, t.id});
      if (t.death_op != kAfterIteration) {
        const std::uint64_t at =
            t.seq >= 0 && t.death_ns ? t.death_ns : p_.ops[static_cast<std::size_t>(t.death_op)].begin_ns + 1;
        events_.push_back({at, 2, t.id});
      }
    }
    for (const OpRecord& op : p_.ops) events_.push_back({op.begin_ns, 1, static_cast<std::uint32_t>(op.index)});
    std::sort(events_.begin(), events_.end());
  }

  std::size_t bytes_of(const TensorRecord& t) const {
    const auto b = static_cast<std::size_t>(static_cast<double>(t.bytes) / scale_);
    return std::max<std::size_t>(512, (b + 511) / 512 * 512);
  }

  // The tensors alive before the first iteration: allocated in address order, written once.
  void start(GpuRuntime& rt, MemfdBackend& be) {
    std::vector<const TensorRecord*> before;
    for (const TensorRecord& t : p_.tensors)
      if (t.seq < 0) before.push_back(&t);
    std::sort(before.begin(), before.end(), [](auto* x, auto* y) { return x->address < y->address; });
    for (const TensorRecord* t : before) carried_[t->address] = allocate(rt, be, *t);
  }

  void iteration(GpuRuntime& rt, MemfdBackend& be) {
    std::unordered_map<std::uint32_t, Live> live;  // tensor id -> block
    // The blocks alive at the end of the last iteration stand for the tensors alive before this one:
    // by address where it is the same, else by size (the trace records a carried block's size as the
    // allocator rounded it, an allocation's as asked for), else the closest in size.
    std::vector<const TensorRecord*> unmatched;
    for (const TensorRecord& t : p_.tensors) {
      if (t.seq >= 0) continue;
      if (auto it = carried_.find(t.address); it != carried_.end()) {
        live[t.id] = it->second;
        carried_.erase(it);
      } else {
        unmatched.push_back(&t);
      }
    }
    for (const TensorRecord* t : unmatched) {
      if (carried_.empty()) {
        live[t->id] = allocate(rt, be, *t);
        continue;
      }
      const std::size_t want = bytes_of(*t);
      const auto off = [want](const Live& l) { return l.bytes > want ? l.bytes - want : want - l.bytes; };
      auto best = carried_.begin();
      for (auto it = carried_.begin(); it != carried_.end(); ++it)
        if (off(it->second) < off(best->second)) best = it;
      live[t->id] = best->second;
      carried_.erase(best);
    }
    for (auto& [a, l] : carried_) rt.deallocate(l.p);
    carried_.clear();
    const bool report = rt.tracing();
    bool explained = false;
    for (const Event& e : events_) {
      if (e.kind == 0) {
        const std::uint64_t spilled = explain_ && !explained ? rt.allocator().stats().spilled_chunks : 0;
        const std::uint64_t fell = explain_ ? rt.allocator().stats().closed_arena_fallbacks : 0;
        live[e.index] = allocate(rt, be, p_.tensors[e.index]);
        if (explain_ && fallbacks_told_ < 6 && rt.allocator().stats().closed_arena_fallbacks > fell) {
          ++fallbacks_told_;
          const TensorRecord& t = p_.tensors[e.index];
          const auto placed = plan().by_seq.find(t.seq);
          const std::int64_t group = placed == plan().by_seq.end() ? -1 : placed->second.group;
          std::printf(
              "  fallback: tensor %u (%s, seq %lld, op %d) of plan group %lld found its group closed; groups not open:",
              t.id, format_bytes(t.bytes).c_str(), static_cast<long long>(t.seq), t.birth_op,
              static_cast<long long>(group));
          for (ArenaId id = 1; id < rt.allocator().arena_count(); ++id) {
            const ArenaResidency r = rt.allocator().residency(id);
            if (!r.open && (r.live_bytes || r.device_bytes || r.moving_bytes))
              std::printf(" %u(dev %llu host %llu moving %llu live %llu)", id,
                          static_cast<unsigned long long>(r.device_bytes >> 10),
                          static_cast<unsigned long long>(r.host_bytes >> 10),
                          static_cast<unsigned long long>(r.moving_bytes >> 10),
                          static_cast<unsigned long long>(r.live_bytes >> 10));
          }
          std::printf("\n");
        }
        if (explain_ && !explained && rt.allocator().stats().spilled_chunks > spilled &&
            nlohmann::json::parse(rt.stats_json()).at("phase") == "planned") {
          explained = true;
          explain(rt, e, live);
        }
      } else if (e.kind == 2) {
        auto it = live.find(e.index);
        if (it != live.end()) {
          rt.deallocate(it->second.p);
          live.erase(it);
        }
      } else {
        const OpRecord& op = p_.ops[e.index];
        std::vector<Live> used;
        for (auto* list : {&op.inputs, &op.outputs})
          for (std::uint32_t t : *list)
            if (auto it = live.find(t); it != live.end()) used.push_back(it->second);
        if (report) {
          rt.op_begin(op.name.c_str());
          for (const Live& l : used) rt.op_tensor(l.p);
        }
        const auto sleep = std::chrono::nanoseconds(
            time_scale_ > 0 ? static_cast<std::int64_t>(static_cast<double>(op.end_ns - op.begin_ns) / time_scale_)
                            : 0);
        be.enqueue(0, [this, used, sleep] {
          if (sleep.count() > 0) std::this_thread::sleep_for(sleep);
          for (const Live& l : used) check(l);
        });
        if (report) rt.op_end();
      }
    }
    // What stays alive into the next iteration, by the address it had in the profile.
    for (auto& [id, l] : live) carried_[p_.tensors[id].address] = l;
    rt.iteration();
  }

  void finish(GpuRuntime& rt, MemfdBackend& be) {
    be.synchronize_stream(0);
    for (auto& [a, l] : carried_) rt.deallocate(l.p);
    carried_.clear();
  }

  std::uint64_t mismatches() const { return bad_.load(); }

  // Bytes the plan leaves in the default arena, live at once, at most (by the replayed order).
  void default_peak(GpuRuntime& rt) {
    const auto& by_seq = plan().by_seq;
    std::size_t same = 0, differ = 0;
    for (const TensorRecord& t : p_.tensors)
      if (auto it = by_seq.find(t.seq); t.seq >= 0 && it != by_seq.end())
        (it->second.bytes == bytes_of(t) ? same : differ)++;
    if (differ)
      std::printf("  (the plan's allocation sizes differ from the profile's at %zu of %zu positions)\n", differ,
                  same + differ);
    std::uint64_t carried = 0;
    for (const LiveBlock& b : rt.allocator().live_blocks())
      if (b.arena == kDefaultArena) carried += b.size;
    std::uint64_t live = carried, peak = 0;
    std::uint32_t at = 0;
    for (const Event& e : events_) {
      if (e.kind == 1) continue;
      const TensorRecord& t = p_.tensors[e.index];
      if (t.seq < 0 || by_seq.count(t.seq)) continue;
      if (e.kind == 0)
        live += bytes_of(t);
      else
        live -= bytes_of(t);
      if (live > peak) {
        peak = live;
        at = e.index;
      }
    }
    std::printf("  plan: default-arena tensors (%s carried in) peak at %s, at tensor %u (op %d)\n",
                format_bytes(static_cast<std::uint64_t>(static_cast<double>(carried) * scale_)).c_str(),
                format_bytes(static_cast<std::uint64_t>(static_cast<double>(peak) * scale_)).c_str(), at,
                p_.tensors[at].birth_op);
  }

  // Where the device memory is at the first spill of a planned iteration (--explain).
  void explain(GpuRuntime& rt, const Event& e, const std::unordered_map<std::uint32_t, Live>& live) {
    GpuAllocator& al = rt.allocator();
    const auto up = [&](std::uint64_t b) {
      return format_bytes(static_cast<std::uint64_t>(static_cast<double>(b) * scale_));
    };
    std::printf("  first spill at tensor %u (op %d of %zu): %s\n", e.index, p_.tensors[e.index].birth_op, p_.ops.size(),
                al.describe().c_str());
    std::uint64_t dev_open = 0, dev_closed = 0, live_open = 0, live_closed = 0;
    std::size_t open = 0, closed = 0;
    for (ArenaId id = 1; id < al.arena_count(); ++id) {
      const ArenaResidency r = al.residency(id);
      if (r.device_bytes == 0 && r.moving_bytes == 0) continue;
      (r.open ? open : closed)++;
      (r.open ? dev_open : dev_closed) += r.device_bytes + r.moving_bytes;
      (r.open ? live_open : live_closed) += r.live_bytes;
      std::printf("    group %u: %s on the device, %s on the host, %s moving, %s live, %s\n", id,
                  up(r.device_bytes).c_str(), up(r.host_bytes).c_str(), up(r.moving_bytes).c_str(),
                  up(r.live_bytes).c_str(), r.open ? "open" : "closed");
    }
    const ArenaResidency d = al.residency(kDefaultArena);
    std::printf(
        "  groups with device memory: %zu open (%s, %s live), %zu closed (%s, %s live); default arena %s on the "
        "device (%s live), %s on the host\n",
        open, up(dev_open).c_str(), up(live_open).c_str(), closed, up(dev_closed).c_str(), up(live_closed).c_str(),
        up(d.device_bytes).c_str(), up(d.live_bytes).c_str(), up(d.host_bytes).c_str());
    // The default arena's live tensors: carried into the iteration (persistent or not) or born in it.
    std::uint64_t carried_persistent = 0, carried_dying = 0, born = 0, born_small = 0, born_grouped = 0;
    const PlanIndex& placed = plan();
    std::uint64_t carried_grouped = 0;
    std::size_t n = 0;
    for (const auto& [id, l] : live) {
      if (al.arena_of(l.p) != kDefaultArena || al.residence_of(l.p) != Residence::device) continue;
      const TensorRecord& t = p_.tensors[id];
      ++n;
      if (t.seq < 0 && placed.by_address.count(reinterpret_cast<std::uint64_t>(l.p)))
        carried_grouped += l.bytes;
      else if (t.seq < 0)
        (t.death_op == kAfterIteration ? carried_persistent : carried_dying) += l.bytes;
      else if (placed.by_seq.count(t.seq))
        born_grouped += l.bytes;
      else
        (l.bytes * scale_ < (1 << 20) ? born_small : born) += l.bytes;
    }
    std::printf("  default arena on the device: %s alive before the iteration that the plan put in groups\n",
                up(carried_grouped).c_str());
    std::printf(
        "  default arena on the device: %zu tensors: alive before the iteration %s (and after it) + %s (dying in "
        "it); born in it %s (+ %s under 1 MiB) and %s the plan put in groups\n",
        n, up(carried_persistent).c_str(), up(carried_dying).c_str(), up(born).c_str(), up(born_small).c_str(),
        up(born_grouped).c_str());
  }

 private:
  Live allocate(GpuRuntime& rt, MemfdBackend& be, const TensorRecord& t) {
    Live l;
    l.bytes = bytes_of(t);
    l.p = rt.allocate(l.bytes, 0);
    l.words = std::min(kCheckWords, bytes_of(t) / 8);
    l.tag = ++tags_;
    be.enqueue(0, [l] {
      auto* w = static_cast<std::uint64_t*>(l.p);
      for (std::size_t i = 0; i < l.words; ++i) w[i] = word_of(l.tag, i);
    });
    return l;
  }
  void check(const Live& l) {
    const auto* w = static_cast<const std::uint64_t*>(l.p);
    for (std::size_t i = 0; i < l.words; ++i)
      if (w[i] != word_of(l.tag, i)) ++bad_;
  }

  // Where the plan the runtime wrote (its plan_out file) put each tensor: read once, when first asked
  // (after the runtime planned); empty without a plan_out file.
  struct PlanIndex {
    struct Placed {
      GroupId group = 0;
      std::uint64_t bytes = 0;
    };
    std::unordered_map<std::int64_t, Placed> by_seq;        // tensors born in the iteration
    std::unordered_map<std::uint64_t, GroupId> by_address;  // tensors alive before the trace
  };
  const PlanIndex& plan() {
    if (!plan_read_ && !plan_out_.empty()) {
      for (const TensorPlacement& pl : read_plan(plan_out_).placements) {
        if (pl.seq >= 0)
          plan_.by_seq[pl.seq] = {pl.group, pl.bytes};
        else
          plan_.by_address[pl.address] = pl.group;
      }
    }
    plan_read_ = true;
    return plan_;
  }

  const Profile& p_;
  double scale_, time_scale_;
  bool explain_ = false;
  std::string plan_out_;  // the runtime's plan_out file (--explain reads it)
  PlanIndex plan_;
  bool plan_read_ = false;
  std::vector<Event> events_;
  std::map<std::uint64_t, Live> carried_;
  std::uint64_t tags_ = 0;
  int fallbacks_told_ = 0;
  std::atomic<std::uint64_t> bad_{0};
};

int run(const Args& a) {
  const Profile p = read_profile(a.profile);
  const int device = p.tensors.empty() ? 0 : std::max(p.tensors.front().device, 0);
  const std::uint64_t peak = p.peak_bytes(device);
  std::uint64_t budget = 0;
  if (!a.budget.empty() && a.budget.back() == '%') {
    const double pct = std::strtod(a.budget.c_str(), nullptr);
    if (!(pct > 0 && pct <= 1000)) usage("bad --budget '" + a.budget + "'");
    budget = static_cast<std::uint64_t>(static_cast<double>(peak) * pct / 100.0);
  } else {
    budget = parse_bytes(a.budget);
  }
  if (budget <= a.context) usage("--budget is not above --context");
  const auto scaled = [&](std::uint64_t b) { return static_cast<std::uint64_t>(static_cast<double>(b) / a.scale); };

  // The bench's defaults, then --gpu (TIERPACK_GPU syntax: a key given again wins). host_limit is 4x the runtime's
  // default: before a plan exists every tensor over the budget spills into a chunk of its own, and at 1/64 scale a
  // chunk holds far fewer of the (scaled) tensors than on the GPU; the twin's stream also releases them late on a
  // busy machine. With 64G, plain runs at 35% ran out of host memory in the warm-up iteration now and then.
  Config o = parse_config("", "chunk:64M,group:512M,min_move:1M,host_limit:256G," + a.gpu);
  o.warmup_iterations = 1;
  o.log = LogLevel::info;
  // Everything in bytes shrinks by the scale; the twin's page is 64 KiB, so chunks stay multiples of it.
  const std::uint64_t page = 64 << 10;
  o.gpu.chunk_bytes = std::max<std::uint64_t>(page, scaled(o.gpu.chunk_bytes) / page * page);
  o.gpu.group_bytes = std::max<std::uint64_t>(o.gpu.chunk_bytes, scaled(o.gpu.group_bytes));
  o.gpu.min_move_bytes = scaled(o.gpu.min_move_bytes);
  o.gpu.host_limit = scaled(o.gpu.host_limit);
  o.gpu_budget.bytes = scaled(budget - a.context);
  o.gpu_budget.fraction.reset();
  o.gpu.prewarm_threads = std::min(o.gpu.prewarm_threads, 1);

  TwinOptions t;
  t.granularity = page;
  t.device_bytes = scaled(peak) * 2 + (64 << 20);
  t.host_bytes = o.gpu.host_limit + (64 << 20);
  auto backend = std::make_unique<MemfdBackend>(t);
  MemfdBackend& be = *backend;
  GpuRuntime rt(std::move(backend), o);
  std::printf(
      "profile %s: %zu ops, %zu tensors, peak %s; budget %s less context %s, at scale 1/%g: "
      "allocator budget %s, chunk %s\n",
      a.profile.c_str(), p.ops.size(), p.tensors.size(), format_bytes(peak).c_str(), format_bytes(budget).c_str(),
      format_bytes(a.context).c_str(), a.scale, format_bytes(*o.gpu_budget.bytes).c_str(),
      format_bytes(o.gpu.chunk_bytes).c_str());
  Replay r(p, a.scale, a.time_scale, a.explain, o.gpu.plan_out);
  // An error leaves work queued on the twin's stream: it must finish before the runtime (which maps
  // the memory it touches) goes.
  auto failed = [&](const char* when, const std::exception& e) {
    std::fprintf(stderr, "gpu_trace_twin: %s: %s\n", when, e.what());
    try {
      be.synchronize_stream(0);
    } catch (const std::exception&) {
    }
    return 1;
  };
  try {
    r.start(rt, be);
  } catch (const std::exception& e) {
    return failed("allocating the tensors alive before the first iteration", e);
  }
  std::printf("%4s %-8s %10s %10s %6s %6s %8s %8s %8s %10s %10s\n", "iter", "phase", "to host", "to dev", "misses",
              "stalls", "waits", "spilled", "fallback", "peak dev", "mismatch");
  bool told_plan = false;
  int planned = 0;
  std::string over;
  for (int i = 0; i < a.iterations; ++i) {
    try {
      r.iteration(rt, be);
      be.synchronize_stream(0);
    } catch (const std::exception& e) {
      return failed(("iteration " + std::to_string(i + 1)).c_str(), e);
    }
    const auto j = nlohmann::json::parse(rt.stats_json());
    const auto& its = j.at("iterations");
    if (its.empty()) continue;
    const auto& it = its.back();
    if (a.explain && !o.gpu.plan_out.empty() && !told_plan && it.at("phase") == "reference") {
      told_plan = true;
      r.default_peak(rt);
    }
    auto up = [&](const char* k) { return format_bytes(static_cast<std::uint64_t>(it.at(k).get<double>() * a.scale)); };
    std::printf("%4d %-8s %10s %10s %6llu %6llu %8llu %8llu %8llu %10s %10llu\n", it.at("iteration").get<int>(),
                it.at("phase").get<std::string>().c_str(), up("bytes_to_host").c_str(), up("bytes_to_device").c_str(),
                static_cast<unsigned long long>(it.at("misses").get<std::uint64_t>()),
                static_cast<unsigned long long>(it.at("stalls").get<std::uint64_t>()),
                static_cast<unsigned long long>(it.at("pressure_waits").get<std::uint64_t>()),
                static_cast<unsigned long long>(it.at("spilled_chunks").get<std::uint64_t>()),
                static_cast<unsigned long long>(it.at("closed_arena_fallbacks").get<std::uint64_t>()),
                up("peak_device_bytes").c_str(), static_cast<unsigned long long>(r.mismatches()));
    std::fflush(stdout);
    if (it.at("phase") == "planned") {
      ++planned;
      const auto spilled = static_cast<long>(it.at("spilled_chunks").get<std::uint64_t>());
      const auto fell = static_cast<long>(it.at("closed_arena_fallbacks").get<std::uint64_t>());
      if (a.max_spilled >= 0 && spilled > a.max_spilled)
        over += "iteration " + std::to_string(i + 1) + " spilled " + std::to_string(spilled) + " chunks; ";
      if (a.max_fallbacks >= 0 && fell > a.max_fallbacks)
        over += "iteration " + std::to_string(i + 1) + " put " + std::to_string(fell) +
                " tensors of closed groups in the default arena; ";
    }
  }
  r.finish(rt, be);
  if ((a.max_spilled >= 0 || a.max_fallbacks >= 0) && planned == 0) over += "no iteration ran planned; ";
  if (!over.empty()) {
    std::fprintf(stderr, "gpu_trace_twin: over the limits: %s\n", over.c_str());
    return 3;
  }
  std::printf("(sizes shown at full scale; mismatches: words found changed since written)\n");
  return r.mismatches() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_trace_twin: %s\n", e.what());
    return 1;
  }
}
