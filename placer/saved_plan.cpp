// Plan of the GPU tier's storage moves (see saved_plan.hpp).
//
// Note [Storage move plan]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// The recorded iteration gives, at every pack and unpack call, the live bytes of PyTorch's allocator
// and the most live bytes until the next call (its window). Without moves the device must hold every
// window. A storage that leaves the device is copied out starting at its pack, let go at a later call
// (its release), and copied back into a new storage allocated at a call before its first unpack (its
// fetch); between release and fetch its bytes are absent from every window.
//
// Releases (one pass in call order): at each call whose window, less what is absent then, is over the
// limit, storages packed at an earlier call and not used before it are let go, the one used last first
// (Belady: absent longest for the same bytes, and in forward the earliest packed, whose copy out is
// queued first), until the window fits. A release is as late as it can be, so its copy out has had the
// most time; nothing is let go that the budget does not need, so no byte moves that need not. A window
// that no release can bring under the limit makes the plan not fit (over_at): the runtime's allocator
// limit then raises out of memory there, as PyTorch would.
//
// Fetches (one pass in order of first use): each storage's copy back starts at the earliest call after
// its release from which every window up to its use still fits with its bytes back on the device. The
// first needed get the memory first. Earlier is better: the copy waits for the compute queued at its
// fetch (its destination is allocated on the compute stream there) and has until its use.
//
// Storages saved during backward (a reentrant checkpoint's recomputation), too small, or not movable
// (parameters) stay; so does one unpacked before it could be let go. One saved again (a view of it, by a
// later op) is let go only after its last pack: the forward still holds it until then, and the runtime
// knows a storage it let go as a new one. One that another owner holds until
// forward ends (held_in_forward: autocast keeps its cast of a parameter in a cache until the autocast
// region exits, before backward) is let go no earlier than backward's first call: letting it go in
// forward would free nothing (GPT-2 large's 1.4 GiB of casts were over the planned peak that way:
// bench/results/gpu-h200-2026-12-01-3, call 1).
//
// Note [Held storages]
// ~~~~~~~~~~~~~~~~~~~~
// Letting a storage go drops autograd's references (the saved tensors' handles); the memory is freed only
// when the program's own references are gone too. A residual connection keeps its block's input in a Python
// variable (`identity = x` in a ResNet bottleneck, `residual = hidden_states` in a transformer layer) until
// the add near the block's end: the previous block's output, let go when that block's call ends, stayed
// until then. The recorded iteration cannot see this (nothing is let go there); the first planned iteration
// of each plan can: the runtime keeps a weak reference to each storage it lets go and, where one outlives
// the release, the call by which it was freed is the storage's held_until (python/tierpack/budget.py,
// Note [Held storages]), and the plan is made again with it at the same limit. A storage held until call h is
// let go no earlier than h (a block with such a member no earlier than h either); one held to the
// iteration's end never.
//
// Note [Streamed step]
// ~~~~~~~~~~~~~~~~~~~~
// The optimizer step reads parameters, gradients and all of its state: for AdamW in fp32 that is 4 bytes of
// parameter, 4 of gradient and 8 of state per parameter, 10-11.6 GiB for the 680-778M-parameter models of the
// bench, at or above 60% of their checkpointing peak (bench/results/gpu-h200-2026-12-04-1): with the state
// fetched before the step, no plan fits there. A streamed step (python/tierpack/optimizer_state.py, Note
// [Streamed step]) updates the parameters a chunk at a time, each chunk's state copied back just before its update
// and out again right after, so the step holds at most a window of state (a chunk arriving, one updating, one leaving).
// With options.stream_window_bytes > 0 the plan lets optimizer state go as if no call used it, and at the step's
// calls counts their live bytes and the window (their recorded window is a whole step's, with its temporaries:
// 3.1 GB on the Llama-style decoder, bench/results/gpu-h200-2026-12-06-1). Then, the first updated first, a state
// let go after its pack comes back in backward where from some call on it fits to the iteration's end: the plan
// fetches it (fetch_at, use_at its update), the step finds it there and keeps it, and the next iteration copies it
// out as in forward. The rest the step fetches (no fetch_at) and sends out: their copies out are not charged at
// their pack, they may be let go at it (they start the iteration away), and the cost model lets the step take as
// long as they need to cross each way, less the step's own GPU time. Sending all the state through the step cost
// the Llama-style decoder ~117 ms a step each way at 60% of checkpointing's peak, with the link idle in backward.
// Both ways cross at once there, and then the link carries less than the two directions alone: a profiled step of
// HF GPT-2 large at 60% of checkpointing's peak streamed 2.43 GB each way with the host-to-device stream busy
// back to back, at 45.2 GB/s in and 50.9 GB/s out (52.6 and 54.7 each alone), the step 69.7 ms against 22.7 ms
// (bench/results/gpu-h200-2026-12-14-1, call 11). With options.both_ways_bytes_per_s known, the step takes at
// least both directions' bytes at that rate.
//
// Note [Recompute]
// ~~~~~~~~~~~~~~~~
// Some saved storages the runtime can make again, bit for bit, from what stays on the device anyway: the
// output of an elementwise activation (GELU, SiLU) from its input, which autograd keeps for the
// activation's own backward; autocast's copy of a parameter from the parameter (python/tierpack/
// recipes.py, Note [Recipes]). Making one again costs the compute stream about recompute_ms (an
// elementwise pass: microseconds per MiB where a copy each way over PCIe costs ~40 us per MiB) and the
// link nothing. So at each release the storages that can be made again are let go first (Belady among
// them), and only then the ones that must be copied (which recomputations count as cheap enough to come
// first is the cost model's choice: Note [Recompute cost]). A storage is made again only from storages on the
// device or themselves made again (a chain: SwiGLU's product from silu(gate), itself made from gate), never
// from one that was copied out, and what a chosen recomputation reads is never copied out after it. A
// recomputed storage has no copy out and no early fetch: it is made at its first use, or earlier where a
// recomputation that reads it is made (its fetch_at: from there it is back on the device, and its own
// recompute_ms is spent there).
//
// Making a storage again keeps what it reads on the device until then, so preferring it can cost room: a
// LayerNorm output made again keeps the block's input (often larger) from being copied out
// (python/tierpack/module_recompute.py, Note [Module recompute]). So the plans that prefer copies, and
// copies only, are among those Note [Recompute cost] compares: a fit is never lost to recomputation (the
// storage mover's CUDA test at 50% of its peak found none before: bench/results/gpu-h200-2026-12-02-2,
// call 4; it passed on the H200 with them: bench/results/gpu-h200-2026-12-02-3, call 1).
#include "placer/saved_plan.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "core/error.hpp"

namespace tierpack::placer {
namespace {

constexpr std::int32_t kNone = -1;

struct StorageSpan {
  std::int32_t pack = kNone;       // first pack
  std::int32_t last_pack = kNone;  // the last pack before its first unpack (a view of it saved again)
  std::int32_t use = kNone;        // first unpack after it
};

std::vector<StorageSpan> spans_of(const SavedTrace& trace) {
  std::vector<StorageSpan> spans(trace.storages.size());
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const SavedEvent& e = trace.events[i];
    if (e.storage < 0 || static_cast<std::size_t>(e.storage) >= spans.size())
      throw logic_error("saved-tensor plan: event " + std::to_string(i) + " names storage " +
                        std::to_string(e.storage) + " of " + std::to_string(spans.size()));
    StorageSpan& s = spans[static_cast<std::size_t>(e.storage)];
    const auto at = static_cast<std::int32_t>(i);
    if (e.kind == SavedEventKind::pack && s.pack == kNone) s.pack = at;
    if (e.kind == SavedEventKind::pack && s.use == kNone) s.last_pack = at;
    if (e.kind == SavedEventKind::unpack && s.pack != kNone && s.use == kNone) s.use = at;
  }
  return spans;
}

std::int32_t first_unpack(const SavedTrace& trace) {
  for (std::size_t i = 0; i < trace.events.size(); ++i)
    if (trace.events[i].kind == SavedEventKind::unpack) return static_cast<std::int32_t>(i);
  return static_cast<std::int32_t>(trace.events.size());
}

void check_options(const SavedPlanOptions& o) {
  if (!(o.d2h_bytes_per_s > 0) || !(o.h2d_bytes_per_s > 0) || !std::isfinite(o.d2h_bytes_per_s) ||
      !std::isfinite(o.h2d_bytes_per_s))
    throw logic_error("saved-tensor plan: link bandwidth must be > 0 bytes/s each way");
}

double copy_ms(std::uint64_t bytes, double bytes_per_s) { return static_cast<double>(bytes) / bytes_per_s * 1e3; }

// Recomputing a storage costs its recompute_ms per byte; Note [Recompute cost].
double ms_per_gib(const SavedStorage& s) {
  return s.bytes == 0 ? 0.0 : s.recompute_ms / static_cast<double>(s.bytes) * static_cast<double>(1ull << 30);
}

SavedPlan plan_once(const SavedTrace& trace, const SavedPlanOptions& options, double cheap_ms_per_gib,
                    bool blocks = true);

}  // namespace

// Note [Block recompute]
// ~~~~~~~~~~~~~~~~~~~~~~
// A block (python/tierpack/module_recompute.py, Note [Block recompute]: a transformer layer, a ResNet
// bottleneck) makes every storage it saved by one run of its forward, from its inputs (SavedBlock::from), in
// SavedBlock::ms. At a call over the limit a block whose call ended before it, none of whose members was used
// yet, competes with the single storages as one candidate: ranked as a recomputation costing ms per GiB of its
// members not let go yet, used where its first member is. Chosen, all those members are let go there and come
// back together at that first use (or earlier, where a recomputation reading one is made). The cost model
// spends its ms once per block at that call. The family of plans (Note [Recompute cost]) is made twice, with and
// without blocks: a block is cheaper per GiB than most recipes, so every plan that admits a recipe admits blocks
// too, and GPT-2 large at
// 75% of its peak ran 254 ms a step with recipes alone and 262-282 ms with blocks admitted
// (bench/results/gpu-h200-2026-12-02-4, calls 1-3).
//
// Note [Block inputs]
// ~~~~~~~~~~~~~~~~~~~
// What a block reads (its input: the residual stream into a transformer layer, the activation into a
// bottleneck) is what full checkpointing keeps, a layer's worth each; under checkpointing's own peak those must
// leave the device too. So a block's inputs may be copied out like any storage (a recipe's may not: an op recipe
// reads its input where it is), before or after the block is chosen, and such a copy returns at the block's run
// (need[]: the earliest run of a chosen block that reads it) rather than at its own first use: its fetch is planned
// for that call, its move's use_at is that call and the cost model makes the run wait for the copy there (an input
// whose own uses end before the run is never copied: the runtime lets its record go at its last use). The
// runtime's block, run again, reads the fetched storage (python/tierpack/module_recompute.py, ModuleRecompute._arg),
// fetching it late if the plan's fetch did not start, and does not hold a storage the plan copies out
// (ModuleRecompute.arm). This is checkpointing with offloaded checkpoints, chosen per input by the same Belady
// order and cost family as everything else.
//
// Note [Block run memory]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A block run again allocates more than the members it hands back: its output and the temporaries of its
// forward, live while it runs. The recorded iteration's check run measures that (SavedBlock::extra_bytes: its peak
// less what was live before it and less its members); the plan adds it to the window of the call where the block
// runs, so a run that would pass the limit there lets more go first. A member the plan had copied out (or made by
// its own recipe) before the block was chosen is made by the run too: the run holds only what it hands back
// (ModuleRecompute.make) and frees the others as its forward goes on, as a forward frees what nothing saves, so
// the largest of them is added as well (held, they were 1.15 GiB at ResNet-50's first bottleneck's run). Measured:
// ResNet-50's first bottleneck adds 0.38 GiB at batch 256, the other stages' first ones 0.05-0.19, the rest ~0.
// Its plans at 60% of checkpointing's peak still pass their planned live peak by 0.35-0.97 GiB with both
// (bench/results/gpu-h200-2026-12-04-1, calls 2-4): something else the planned iterations hold is not modelled yet.
//
// Note [Recompute cost]
// ~~~~~~~~~~~~~~~~~~~~~
// Making a storage again costs the compute stream its recompute_ms; copying it costs the link, which is
// free while compute runs and the copies already planned leave it idle. Which is cheaper depends on the
// whole plan, so the choice is made by the cost model (Note [Storage move cost]) over a family of plans:
// each plan_once lets go first the storages whose recomputation costs at most `cheap` ms per GiB (as
// recomputations), then copies, then, where only a recomputation is left (an input a chosen recomputation
// keeps), the dearer recomputations. `cheap` runs from "every recomputation" down through the distinct
// costs per GiB of the storages (at most 8 of them, evenly spaced in their sorted order) to "none first",
// then copies only; the plan that fits with the least predicted step is taken (the first of equals).
// None fits: the one whose planned peak is least (the run goes least over its budget; the first of equals by
// predicted step), which says where it is over. (It was the one that prefers recomputation: the Llama-style
// decoder under 60% of checkpointing's peak ran no block at all that way: bench/results/gpu-h200-2026-12-04-1.)
//
// A module's call run again makes everything it saved (python/tierpack/module_recompute.py): its members
// share a recompute_group and each carries the whole run's time, spent once per call where members of the
// group are made (Note [Storage move cost]). Shared by bytes instead, a plan that made one member of a
// GELU call again was charged a fifth of the run: the H200 measured 8.5x the plan's estimate on GPT-2 large
// (bench/results/gpu-h200-2026-12-02-3, call 4).
SavedPlan plan_saved_tensors(const SavedTrace& trace, const SavedPlanOptions& options) {
  check_options(options);
  constexpr double kAll = std::numeric_limits<double>::infinity();
  const bool blocks = options.recompute && !trace.blocks.empty();
  SavedPlan first = plan_once(trace, options, kAll, blocks);
  if (!options.recompute) return first;
  std::vector<double> costs;
  for (const SavedStorage& s : trace.storages)
    if (s.recompute_ms >= 0 && s.movable) costs.push_back(ms_per_gib(s));
  // `cheap` from "every recomputation" down through the costs per GiB, then copies first
  const auto thresholds = [](std::vector<double> c) {
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    std::vector<double> cheap;
    constexpr std::size_t kSteps = 8;
    for (std::size_t k = 1; k < kSteps && c.size() > 1; ++k) {  // the dearest is kAll's family
      const std::size_t at = (c.size() - 1) * (kSteps - k) / kSteps;
      if (cheap.empty() || cheap.back() != c[at]) cheap.push_back(c[at]);
    }
    cheap.push_back(-1.0);
    return cheap;
  };
  std::optional<SavedPlan> best, closest;  // the fastest that fits; of none, the least planned peak
  const auto consider = [&](SavedPlan plan) {
    if (plan.fits && (!best || plan.predicted_ms < best->predicted_ms)) best = std::move(plan);
    else if (!plan.fits && (!closest || plan.planned_peak < closest->planned_peak ||
                            (plan.planned_peak == closest->planned_peak && plan.predicted_ms < closest->predicted_ms)))
      closest = std::move(plan);
  };
  if (blocks) {  // Note [Block recompute]: the family with blocks, their run's cost per GiB among the thresholds
    std::vector<double> with = costs;
    std::vector<std::uint64_t> bytes(trace.blocks.size(), 0);
    for (const SavedStorage& s : trace.storages)
      if (s.block >= 0 && s.movable && static_cast<std::size_t>(s.block) < bytes.size())
        bytes[static_cast<std::size_t>(s.block)] += s.bytes;
    for (std::size_t b = 0; b < trace.blocks.size(); ++b)
      if (bytes[b] > 0) with.push_back(trace.blocks[b].ms / static_cast<double>(bytes[b]) * static_cast<double>(1ull << 30));
    consider(first);
    for (double c : thresholds(with)) consider(plan_once(trace, options, c, true));
  }
  // ... and without them: a block is cheaper per GiB than most op and module recipes, so every plan above that
  // admits a recipe admits the blocks too, and a plan of recipes alone may be the faster.
  SavedPlan plain = blocks ? plan_once(trace, options, kAll, false) : first;
  consider(plain);
  for (double c : thresholds(costs)) consider(plan_once(trace, options, c, false));
  SavedPlanOptions copies = options;
  copies.recompute = false;
  consider(plan_once(trace, copies, -1.0));
  return best ? std::move(*best) : std::move(*closest);
}

namespace {

// Whether storage `s` is fetched by a streamed optimizer step rather than by the plan (Note [Streamed step]).
bool streamed(const SavedTrace& trace, const SavedPlanOptions& options, std::size_t s) {
  return options.stream_window_bytes > 0 && trace.storages[s].optimizer_state;
}

SavedPlan plan_once(const SavedTrace& trace, const SavedPlanOptions& options, double cheap_ms_per_gib, bool blocks) {
  std::vector<StorageSpan> spans = spans_of(trace);
  // Note [Streamed step]: optimizer state is let go as if used by no call; the fetches below bring back what fits
  // before the step (step_use: its update), the step fetches the rest.
  std::vector<std::int32_t> step_use(spans.size(), kNone);
  std::int32_t step_start = kNone;  // the step's first call
  for (std::size_t s = 0; s < spans.size(); ++s)
    if (streamed(trace, options, s) && spans[s].use != kNone) {
      step_use[s] = spans[s].use;
      step_start = step_start == kNone ? spans[s].use : std::min(step_start, spans[s].use);
      spans[s].use = kNone;
    }
  const std::int32_t backward = first_unpack(trace);
  const std::size_t n = trace.events.size();
  SavedPlan plan;
  plan.limit_bytes = options.limit_bytes;

  // Releases (Note [Storage move plan]). away[s]: its release call, or kNone.
  std::vector<std::int32_t> release(spans.size(), kNone);
  std::vector<char> recompute(spans.size(), 0), pinned(spans.size(), 0);  // Note [Recompute]
  const auto can_recompute = [&](std::size_t s) {
    const SavedStorage& st = trace.storages[s];
    if (!options.recompute || st.recompute_ms < 0) return false;
    for (std::int32_t in : st.recompute_from)
      if (in < 0 || static_cast<std::size_t>(in) >= spans.size() || static_cast<std::size_t>(in) == s ||
          (release[static_cast<std::size_t>(in)] != kNone && !recompute[static_cast<std::size_t>(in)]))
        return false;  // an input copied out (or a recipe naming itself) cannot be read
    return true;
  };
  std::vector<std::uint64_t> returning(n + 1, 0);  // bytes back on the device at each call (fetched at use)
  // Note [Block run memory]: what the chosen blocks' runs add at the call where each runs, and where that is.
  std::vector<std::uint64_t> extra_at(n + 1, 0);
  // What the device holds at most from call i to the next: its recorded window and what the plan adds there. At a
  // streamed step's calls the recorded window is the whole step's (a step over all the state at once: its
  // temporaries 3.1 GB on the Llama-style decoder, bench/results/gpu-h200-2026-12-06-1); the streamed step updates
  // a chunk at a time, so it holds the live bytes and the window of state (Note [Streamed step]).
  std::vector<char> chunked(n, 0);
  const auto window_at = [&](std::size_t i) {
    return (chunked[i] ? trace.events[i].live : trace.events[i].window_peak) + extra_at[i];
  };
  if (options.stream_window_bytes > 0) {  // Note [Streamed step]: the window of state the step holds at its calls
    std::uint64_t state = 0;
    for (std::size_t s = 0; s < spans.size(); ++s) state += streamed(trace, options, s) ? trace.storages[s].bytes : 0;
    for (std::size_t i = 0; i < n; ++i)
      if (trace.events[i].kind == SavedEventKind::unpack &&
          streamed(trace, options, static_cast<std::size_t>(trace.events[i].storage))) {
        extra_at[i] = std::min(state, options.stream_window_bytes);
        chunked[i] = 1;
      }
  }
  std::vector<std::int32_t> run_at(trace.blocks.size(), kNone);
  std::vector<std::uint64_t> run_extra(trace.blocks.size(), 0);
  const auto run_block = [&](std::size_t bl, std::int32_t at) {
    if (run_at[bl] != kNone) extra_at[static_cast<std::size_t>(run_at[bl])] -= run_extra[bl];
    extra_at[static_cast<std::size_t>(at)] += run_extra[bl];
    run_at[bl] = at;
  };
  // back[s]: where a recomputed storage is made again: its first use, or the earlier point where a
  // recomputation that reads it is made (Note [Recompute]); its bytes return there.
  // A copied storage returns at its use, or earlier where a block that reads it runs again (Note [Block inputs]).
  std::vector<std::int32_t> back(spans.size(), kNone);
  // need[s]: the earliest call where a chosen block that reads s runs again; kNone: none does. last_need[s]: the
  // latest (a copy of s is back at need[s] and must still be in use at last_need[s]).
  std::vector<std::int32_t> need(spans.size(), kNone), last_need(spans.size(), kNone);
  // Note [Block recompute]: a block's members the plan lets go to be made by running the block again.
  std::vector<char> by_block(spans.size(), 0);
  std::vector<std::vector<std::size_t>> members(trace.blocks.size());
  for (std::size_t s = 0; s < spans.size(); ++s) {
    const SavedStorage& st = trace.storages[s];
    if (st.block >= 0 && static_cast<std::size_t>(st.block) < members.size() && st.movable && st.bytes >= options.min_bytes &&
        spans[s].pack != kNone && spans[s].pack < backward && spans[s].use != kNone)
      members[static_cast<std::size_t>(st.block)].push_back(s);
  }
  const auto inputs_of = [&](std::size_t s) -> const std::vector<std::int32_t>& {
    return by_block[s] ? trace.blocks[static_cast<std::size_t>(trace.storages[s].block)].from : trace.storages[s].recompute_from;
  };
  const auto move_back = [&](std::size_t s, std::int32_t at) {
    returning[static_cast<std::size_t>(back[s])] -= trace.storages[s].bytes;
    returning[static_cast<std::size_t>(at)] += trace.storages[s].bytes;
    back[s] = at;
  };
  // A chosen block runs again at `at` and reads `in`: a copy of it comes back by then (Note [Block inputs]).
  const auto needs = [&](std::size_t in, std::int32_t at) {
    need[in] = need[in] == kNone ? at : std::min(need[in], at);
    last_need[in] = std::max(last_need[in], at);
    if (release[in] != kNone && !recompute[in] && (back[in] == kNone || back[in] > at)) {
      if (back[in] != kNone) returning[static_cast<std::size_t>(back[in])] -= trace.storages[in].bytes;
      returning[static_cast<std::size_t>(at)] += trace.storages[in].bytes;
      back[in] = at;
    }
  };
  const auto make_earlier = [&](auto&& self, std::size_t s, std::int32_t at) -> void {
    for (std::int32_t in_ : inputs_of(s)) {
      const auto in = static_cast<std::size_t>(in_);
      if (!recompute[in] && by_block[s]) needs(in, at);
      if (!recompute[in] || back[in] <= at) continue;
      if (by_block[in]) {  // the block runs once: every member it makes comes back there
        const auto bl = static_cast<std::size_t>(trace.storages[in].block);
        for (std::size_t m : members[bl])
          if (by_block[m] && back[m] > at) move_back(m, at);
        if (run_at[bl] > at) run_block(bl, at);
      } else {
        move_back(in, at);
      }
      self(self, in, at);
    }
  };
  // Where a storage made again returns: its use, or where a recomputation made after `at` that reads it is made.
  const auto returns_at = [&](std::size_t b_, std::int32_t returns, std::int32_t at) {
    for (std::size_t d = 0; d < spans.size(); ++d)
      if (recompute[d] && d != b_ && back[d] > at) {
        const auto& from = inputs_of(d);
        if (std::find(from.begin(), from.end(), static_cast<std::int32_t>(b_)) != from.end()) returns = std::min(returns, back[d]);
      }
    return returns;
  };
  std::uint64_t absent = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto at = static_cast<std::int32_t>(i);
    absent -= returning[i];
    const std::uint64_t window = window_at(i);
    if (window > options.limit_bytes) plan.bytes_needed = std::max(plan.bytes_needed, window - options.limit_bytes);
    while (window - std::min(window, absent) > options.limit_bytes) {
      // The movable storage packed in forward before this call, not yet let go, used last; one that can
      // be made again before any that must be copied (Note [Recompute]).
      std::int32_t best = kNone;
      std::int64_t best_use = -1;
      int best_rank = 3;
      for (std::size_t s = 0; s < spans.size(); ++s) {
        const StorageSpan& sp = spans[s];
        const SavedStorage& st = trace.storages[s];
        // (a streamed step's state starts the iteration away, copied by the last step: let go at its pack too)
        if (release[s] != kNone || !st.movable || st.bytes < options.min_bytes || sp.pack == kNone ||
            sp.last_pack > at || (sp.last_pack == at && !streamed(trace, options, s)) ||
            sp.pack >= backward || (sp.use != kNone && sp.use <= at) || (need[s] != kNone && need[s] <= at) ||
            (st.held_in_forward && at < backward) || st.held_until > at)  // Note [Held storages]
          continue;
        const bool re = sp.use != kNone && can_recompute(s);
        if (pinned[s] && !re) continue;  // a chosen recomputation reads it: it is not copied out
        // Note [Recompute cost]: 0 a cheap recomputation, 1 a copy, 2 a dear recomputation (nothing else left)
        const int rank = re && ms_per_gib(st) <= cheap_ms_per_gib ? 0 : pinned[s] ? 2 : 1;
        std::int64_t use = sp.use == kNone ? std::numeric_limits<std::int64_t>::max() : sp.use;
        if (rank == 1 && need[s] != kNone) {  // back for a block's run (Note [Block inputs])
          if (sp.use != kNone && sp.use < last_need[s]) continue;  // used up before a run: it must stay
          use = std::min<std::int64_t>(use, need[s]);
        }
        if (best == kNone || rank < best_rank ||
            (rank == best_rank &&
             (use > best_use || (use == best_use && sp.pack < spans[static_cast<std::size_t>(best)].pack)))) {
          best = static_cast<std::int32_t>(s);
          best_use = use;
          best_rank = rank;
        }
      }
      // A block whose call ended before this call: all its members not let go yet, made by one run (Note
      // [Block recompute]); it competes as one candidate, used at its first member's use.
      std::int32_t best_block = kNone;
      for (std::size_t bl = 0; options.recompute && blocks && bl < members.size(); ++bl) {
        std::uint64_t bytes = 0;
        std::int64_t use = std::numeric_limits<std::int64_t>::max();
        bool ok = !members[bl].empty();
        for (std::size_t m : members[bl]) {
          if (release[m] != kNone) continue;
          const StorageSpan& sp = spans[m];
          if (sp.last_pack >= at || sp.use <= at || (trace.storages[m].held_in_forward && at < backward) ||
              trace.storages[m].held_until > at) {
            ok = false;
            break;
          }
          bytes += trace.storages[m].bytes;
          use = std::min<std::int64_t>(use, sp.use);
        }
        // An input copied out comes back before it runs, if it is still in use then (Note [Block inputs]).
        for (std::int32_t in : trace.blocks[bl].from) {
          const auto ii = static_cast<std::size_t>(in);
          ok = ok && !(release[ii] != kNone && !recompute[ii] && spans[ii].use != kNone && spans[ii].use < use);
        }
        if (!ok || bytes == 0) continue;
        const double per_gib = trace.blocks[bl].ms / static_cast<double>(bytes) * static_cast<double>(1ull << 30);
        const int rank = per_gib <= cheap_ms_per_gib ? 0 : 2;
        if (rank < best_rank || (rank == best_rank && use > best_use)) {
          best_block = static_cast<std::int32_t>(bl);
          best_rank = rank;
          best_use = use;
        }
      }
      if (best_block != kNone) {
        const auto bl = static_cast<std::size_t>(best_block);
        std::vector<std::size_t> now;
        std::uint64_t again = 0;  // the largest member it does not hand back (Note [Block run memory])
        for (std::size_t m : members[bl])
          if (release[m] == kNone) now.push_back(m);
          else again = std::max(again, trace.storages[m].bytes);
        run_extra[bl] = trace.blocks[bl].extra_bytes + again;
        std::int32_t returns = static_cast<std::int32_t>(best_use);
        for (std::size_t m : now) returns = returns_at(m, returns, at);
        for (std::size_t m : now) {
          release[m] = at;
          recompute[m] = by_block[m] = 1;
          absent += trace.storages[m].bytes;
          back[m] = returns;
          returning[static_cast<std::size_t>(returns)] += trace.storages[m].bytes;
        }
        run_block(bl, returns);
        make_earlier(make_earlier, now.front(), returns);  // what it reads is back by then (Note [Block inputs])
        continue;
      }
      const bool best_re = best_rank != 1;
      if (best == kNone) {
        if (plan.fits) plan.over_at = at;
        plan.fits = false;
        break;
      }
      const auto b = static_cast<std::size_t>(best);
      release[b] = at;
      absent += trace.storages[b].bytes;
      std::int32_t returns = spans[b].use;
      if (!best_re && need[b] != kNone && (returns == kNone || need[b] < returns)) returns = need[b];
      back[b] = returns;
      if (best_re) {
        recompute[b] = 1;
        for (std::int32_t in : trace.storages[b].recompute_from) pinned[static_cast<std::size_t>(in)] = 1;
        returns = returns_at(b, returns, at);  // made where the first recomputation reading it is made
        back[b] = returns;
        make_earlier(make_earlier, b, returns);  // what it reads, if made again, is made with it
      }
      if (returns != kNone) returning[static_cast<std::size_t>(returns)] += trace.storages[b].bytes;
    }
  }

  // Fetches, first used first: absent_at[i] is what is away at call i with the fetches chosen so far.
  std::vector<std::uint64_t> absent_at(n, 0);
  std::vector<std::int32_t> moved;
  for (std::size_t s = 0; s < spans.size(); ++s)
    if (release[s] != kNone) {
      moved.push_back(static_cast<std::int32_t>(s));
      const std::int32_t end = back[s] == kNone ? static_cast<std::int32_t>(n) : back[s];
      for (std::int32_t i = release[s]; i < end; ++i) absent_at[static_cast<std::size_t>(i)] += trace.storages[s].bytes;
    }
  std::sort(moved.begin(), moved.end(), [&](std::int32_t a, std::int32_t b) {
    const auto ua = static_cast<std::uint32_t>(back[static_cast<std::size_t>(a)]);  // kNone sorts last
    const auto ub = static_cast<std::uint32_t>(back[static_cast<std::size_t>(b)]);
    return ua != ub ? ua < ub : a < b;
  });
  std::vector<std::int32_t> fetch(spans.size(), kNone);
  const auto present_at = [&](std::size_t i) {
    const std::uint64_t window = window_at(i);
    return window - std::min(window, absent_at[i]);
  };
  // Note [Streamed step]: optimizer state comes back before the step where from some call in backward to the
  // iteration's end it fits (the step then keeps it: the next iteration copies it out as in forward); what does
  // not is fetched by the step, a chunk at a time. In order of their update, the first updated first.
  std::vector<std::int32_t> by_update;
  for (std::int32_t s : moved)
    if (step_use[static_cast<std::size_t>(s)] != kNone) by_update.push_back(s);
  std::sort(by_update.begin(), by_update.end(), [&](std::int32_t a, std::int32_t b) {
    return step_use[static_cast<std::size_t>(a)] < step_use[static_cast<std::size_t>(b)];
  });
  for (std::int32_t s : by_update) {
    const auto si = static_cast<std::size_t>(s);
    const std::uint64_t bytes = trace.storages[si].bytes;
    bool fits = true;
    for (std::size_t i = static_cast<std::size_t>(step_start); fits && i < n; ++i)
      fits = present_at(i) + bytes <= options.limit_bytes;
    std::int32_t f = step_start;
    for (std::int32_t i = step_start - 1; fits && i > std::max(release[si], backward - 1); --i) {
      if (present_at(static_cast<std::size_t>(i)) + bytes > options.limit_bytes) break;
      f = i;
    }
    // (one let go at its pack is not copied out by then: it must have started the iteration away)
    if (!fits || f >= step_start || release[si] <= spans[si].last_pack) continue;
    fetch[si] = f;
    back[si] = step_use[si];
    for (std::size_t i = static_cast<std::size_t>(f); i < n; ++i) absent_at[i] -= bytes;
  }
  for (std::int32_t s : moved) {
    const auto si = static_cast<std::size_t>(s);
    const std::int32_t use = back[si];  // its first use, or a block's run that reads it (Note [Block inputs])
    if (use == kNone || step_use[si] != kNone) continue;
    if (recompute[si]) {  // made at its use (or a reader's): absent until then
      fetch[si] = back[si];
      continue;
    }
    const std::uint64_t bytes = trace.storages[si].bytes;
    std::int32_t f = use;
    for (std::int32_t i = use - 1; i > release[si]; --i) {
      if (present_at(static_cast<std::size_t>(i)) + bytes > options.limit_bytes) break;
      f = i;
    }
    fetch[si] = f;
    for (std::int32_t i = f; i < use; ++i) absent_at[static_cast<std::size_t>(i)] -= bytes;
  }

  for (std::size_t i = 0; i < n; ++i) plan.planned_peak = std::max(plan.planned_peak, present_at(i));
  std::vector<std::int32_t> by_copy;
  for (std::size_t s = 0; s < spans.size(); ++s)
    if (release[s] != kNone) by_copy.push_back(static_cast<std::int32_t>(s));
  std::sort(by_copy.begin(), by_copy.end(), [&](std::int32_t a, std::int32_t b) {
    return spans[static_cast<std::size_t>(a)].pack < spans[static_cast<std::size_t>(b)].pack;
  });
  for (std::int32_t s : by_copy) {
    const auto si = static_cast<std::size_t>(s);
    plan.moves.push_back({s, spans[si].pack, release[si], fetch[si], recompute[si] ? spans[si].use : back[si],
                          recompute[si] != 0, by_block[si] != 0});
    if (recompute[si]) {
      plan.bytes_recomputed += trace.storages[si].bytes;
      continue;
    }
    plan.bytes_out += trace.storages[si].bytes;
    if (fetch[si] != kNone || step_use[si] != kNone) plan.bytes_in += trace.storages[si].bytes;
  }
  predict_saved_plan(trace, options, plan);
  // The bound of what still crosses the link: the bytes made again are away without a copy.
  std::vector<std::uint64_t> remade(n, 0);
  for (const SavedMove& m : plan.moves)
    if (m.recompute)
      for (std::int32_t i = m.release_at; i < m.fetch_at; ++i)
        remade[static_cast<std::size_t>(i)] += trace.storages[static_cast<std::size_t>(m.storage)].bytes;
  plan.bound_ms = saved_transfer_bound_ms(trace, options.limit_bytes, options.d2h_bytes_per_s,
                                          options.h2d_bytes_per_s, &remade);
  return plan;
}

}  // namespace

// Note [Storage move cost]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// The recorded GPU times between calls are the compute the plan cannot shorten. Walking the calls in
// order with the delay so far: a copy out starts when compute reaches its pack and the link is free
// (one copy at a time each way, in the order they were issued); a copy back starts when compute reaches
// its fetch, the link is free and its own copy out has ended; at a release compute waits for the copy
// out, at a use for the copy back. Each wait delays every later call. Driver costs are left out: storage
// moves are plain copies on side streams and event waits (no remaps, no gates); the host's own time is Note
// [Host time]'s.
//
// Note [Host time]
// ~~~~~~~~~~~~~~~~
// The GPU runs the work after a call only once the host has launched it. Where the host runs far ahead (a
// large model's long kernels) its hooks' time is hidden; where it barely keeps up (a T5-style model of
// thousands of small kernels: its hooks' host time grew 160 to 300-430 ms a step with ~1000 storages copied
// out and back, its step from 302 to 676-896 ms: bench/results/gpu-h200-2026-12-03-1, calls 1-2) every
// millisecond the hooks spend shows in the step. With the host's time at each call measured (SavedEvent::
// host_ms, in an iteration whose hooks move nothing), the walk keeps the host's extra time so far: each copy
// issued costs host_ms_per_copy, each recomputation run by its recipe or module host_ms_per_remake (once per
// group), each block run its own host_ms (Python launching its forward again); a call is reached no earlier
// than the host reaches it, and a recomputation ends no earlier than the host has launched it. Both costs are
// measured by the runtime in a planned iteration; unknown (0, or a trace without host times), the walk is the
// GPU's alone, as before. The two clocks start at the iteration's start mark, which the GPU reaches when it has
// finished what came before: that lag is taken as the least every call allows (no call's GPU time before its
// host time), so a host that was not behind is never made so.
bool counts_host_time(const SavedTrace& trace) {
  return !trace.events.empty() &&
         std::all_of(trace.events.begin(), trace.events.end(), [](const SavedEvent& e) { return e.host_ms >= 0; });
}

SavedTrace without_host_time(SavedTrace trace) {
  for (SavedEvent& e : trace.events) e.host_ms = -1;
  for (SavedBlock& b : trace.blocks) b.host_ms = 0;
  return trace;
}

void predict_saved_plan(const SavedTrace& trace, const SavedPlanOptions& options, SavedPlan& plan) {
  check_options(options);
  const std::size_t n = trace.events.size();
  std::vector<std::vector<std::size_t>> copies(n), releases(n), fetches(n), uses(n);
  // optimizer state the streamed step brings back and sends out (Note [Streamed step])
  std::uint64_t streamed_bytes = 0;
  for (std::size_t m = 0; m < plan.moves.size(); ++m) {
    const SavedMove& mv = plan.moves[m];
    auto in_range = [n](std::int32_t i) { return i >= 0 && static_cast<std::size_t>(i) < n; };
    if (!in_range(mv.copy_at) || !in_range(mv.release_at) || (mv.fetch_at != kNone && !in_range(mv.fetch_at)) ||
        (mv.use_at != kNone && !in_range(mv.use_at)) || mv.storage < 0 ||
        static_cast<std::size_t>(mv.storage) >= trace.storages.size())
      throw logic_error("saved-tensor plan: move " + std::to_string(m) +
                        " refers to calls or a storage the trace lacks");
    if (mv.recompute) {  // no copy either way: made at its fetch (its use, or a reader's: Note [Recompute])
      if (mv.fetch_at != kNone) uses[static_cast<std::size_t>(mv.fetch_at)].push_back(m);
      continue;
    }
    if (streamed(trace, options, static_cast<std::size_t>(mv.storage)) && mv.fetch_at == kNone) {  // in the step: below
      streamed_bytes += trace.storages[static_cast<std::size_t>(mv.storage)].bytes;
      continue;
    }
    if (mv.use_at != kNone) uses[static_cast<std::size_t>(mv.use_at)].push_back(m);
    copies[static_cast<std::size_t>(mv.copy_at)].push_back(m);
    releases[static_cast<std::size_t>(mv.release_at)].push_back(m);
    if (mv.fetch_at != kNone) fetches[static_cast<std::size_t>(mv.fetch_at)].push_back(m);
  }
  std::vector<double> out_end(plan.moves.size(), 0), in_end(plan.moves.size(), 0);
  double delay = 0, d2h_free = 0, h2d_free = 0;
  const bool host = counts_host_time(trace);  // Note [Host time]
  double host_extra = 0;  // host time the plan's actions added before this call
  // The GPU reached the iteration's start mark `lag` after the host recorded it: at least as late as every call's
  // host time says (the GPU runs nothing before the host launched it), taken no later than that.
  double lag = 0;
  for (std::size_t i = 0; host && i < n; ++i) lag = std::max(lag, trace.events[i].host_ms - trace.events[i].t_ms);
  for (std::size_t i = 0; i < n; ++i) {
    const double gpu_at = trace.events[i].t_ms + delay;
    const double host_at = host ? trace.events[i].host_ms - lag + host_extra : 0.0;
    const double at = std::max(gpu_at, host_at);
    double now = at, remake = 0, remake_host = 0;
    // one run of a group (a module call, a block) makes all it made again here (Note [Recompute cost])
    std::vector<std::pair<bool, std::int32_t>> groups;
    for (std::size_t m : uses[i]) {
      const SavedMove& mv = plan.moves[m];
      const SavedStorage& st = trace.storages[static_cast<std::size_t>(mv.storage)];
      if (!mv.recompute) {
        now = std::max(now, in_end[m]);
        continue;
      }
      if (mv.by_block && (st.block < 0 || static_cast<std::size_t>(st.block) >= trace.blocks.size()))
        throw logic_error("saved-tensor plan: move " + std::to_string(m) + " is made by a block the trace lacks");
      const std::pair<bool, std::int32_t> group{mv.by_block, mv.by_block ? st.block : st.recompute_group};
      if (group.second >= 0 && std::find(groups.begin(), groups.end(), group) != groups.end()) continue;
      if (group.second >= 0) groups.push_back(group);
      remake += mv.by_block ? trace.blocks[static_cast<std::size_t>(st.block)].ms : st.recompute_ms;
      remake_host += mv.by_block ? trace.blocks[static_cast<std::size_t>(st.block)].host_ms : options.host_ms_per_remake;
    }
    for (std::size_t m : releases[i]) now = std::max(now, out_end[m]);
    now += remake;  // the compute stream makes them again before the use
    if (host) {     // ... once the host has launched them (Note [Host time])
      now = std::max(now, host_at + remake_host);
      host_extra += remake_host + options.host_ms_per_copy * static_cast<double>(fetches[i].size() + copies[i].size());
    }
    delay += now - gpu_at;
    for (std::size_t m : fetches[i]) {
      const std::uint64_t bytes = trace.storages[static_cast<std::size_t>(plan.moves[m].storage)].bytes;
      const double start = std::max({now, h2d_free, out_end[m]});
      h2d_free = in_end[m] = start + copy_ms(bytes, options.h2d_bytes_per_s);
    }
    for (std::size_t m : copies[i]) {
      const std::uint64_t bytes = trace.storages[static_cast<std::size_t>(plan.moves[m].storage)].bytes;
      d2h_free = out_end[m] = std::max(now, d2h_free) + copy_ms(bytes, options.d2h_bytes_per_s);
    }
  }
  if (streamed_bytes > 0) {  // each way through the link while the step updates what has arrived (Note [Streamed step])
    double link_ms = std::max(copy_ms(streamed_bytes, options.h2d_bytes_per_s),
                              copy_ms(streamed_bytes, options.d2h_bytes_per_s));
    if (options.both_ways_bytes_per_s > 0)  // both directions at once share the link
      link_ms = std::max(link_ms, copy_ms(2 * streamed_bytes, options.both_ways_bytes_per_s));
    delay += std::max(0.0, link_ms - trace.optimizer_ms);
  }
  plan.stall_ms = delay;
  plan.predicted_ms = trace.step_ms + delay;
}

// Note [Two-way transfer bound]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// bench/gpu/transfer_bound.py (Note [Transfer bound]) asks only that the bytes over the limit at a moment
// tau left the device before tau. The storages this plan moves (saved activations, optimizer state) are
// also read again in the same iteration, so every byte away at tau crosses back after tau, before the
// end of the iteration's optimizer step. With S the step, O the optimizer step's GPU time, tau the time
// from the forward's start, over the bytes over the limit at tau, Bd and Bh the two bandwidths: the
// window from the previous optimizer step's start to tau lasts at least max(O + tau, over / Bd), the one
// from tau to this optimizer step's end at least max(S - tau, over / Bh); they follow each other and
// together span one step plus one optimizer step, so
//
//     step >= max(O + tau, over / Bd) + max(S - tau, over / Bh) - O.
//
// A window's peak lies somewhere between its call and the next; the bound takes the tau there that
// gives the least (the weakest choice, so it holds). On GPT-2 large at 75% of its peak the one-way bound
// was 193 ms and the step 291 ms, with each copy stream busy 134 ms of it, out before the peak and back
// after it (bench/results/gpu-h200-2026-12-01-2, call 1).
double saved_transfer_bound_ms(const SavedTrace& trace, std::uint64_t limit_bytes, double d2h_bytes_per_s,
                               double h2d_bytes_per_s, const std::vector<std::uint64_t>* remade) {
  if (!(d2h_bytes_per_s > 0) || !(h2d_bytes_per_s > 0))
    throw logic_error("transfer bound: bandwidths must be > 0 bytes/s");
  const double step = trace.step_ms;
  const double opt = trace.optimizer_ms;
  double bound = step;
  const std::size_t n = trace.events.size();
  for (std::size_t i = 0; i < n; ++i) {
    const SavedEvent& e = trace.events[i];
    const std::uint64_t window =
        e.window_peak - std::min(e.window_peak, remade && i < remade->size() ? (*remade)[i] : std::uint64_t{0});
    if (window <= limit_bytes) continue;
    const double lo = trace.events[i].t_ms;
    const double hi = std::max(lo, i + 1 < n ? trace.events[i + 1].t_ms : step - opt);
    const double out = copy_ms(window - limit_bytes, d2h_bytes_per_s);
    const double back = copy_ms(window - limit_bytes, h2d_bytes_per_s);
    const auto at = [&](double tau) { return std::max(opt + tau, out) + std::max(step - tau, back) - opt; };
    // Piecewise linear in tau: its least value on [lo, hi] is at an end or where a max changes sides.
    double least = std::min(at(lo), at(hi));
    for (double tau : {out - opt, step - back})
      if (tau > lo && tau < hi) least = std::min(least, at(tau));
    bound = std::max(bound, least);
  }
  return bound;
}

}  // namespace tierpack::placer
