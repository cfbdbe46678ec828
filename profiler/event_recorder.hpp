// EventRecorder: the framework side of the profiler. The torch integration (or a test) feeds it
// allocation, free, op begin/end and iteration events; it skips warm-up iterations, records the
// profiled iteration in full (ops, tensors, uses, page data through a PageJoin), keeps checking later
// iterations for divergence, and builds the Profile (core/profile.hpp).
//
// Note [Recorder states]
//   idle       nothing happens: every entry point returns after one relaxed atomic load.
//   observing  warm-up and after the profiled iterations: live allocations, per-thread op stacks
//              (for the allocating op of each tensor) and allocation signatures are kept, so
//              iterations can be told apart and compared; no op is recorded.
//   recording  the profiled iteration: every op, allocation, free and page window is recorded.
//   done       finish() was called or max_iterations reached: back to the cheap path.
//
// Note [Tensor identity]
// A tensor is identified across iterations by (device, seq, bytes, allocating op): seq is its position
// in the iteration's allocation sequence on its device. The per-iteration signature hashes the sizes of
// that sequence per device; a later iteration whose sequence differs from the profiled one (a size, or
// the allocating op where both are known) is a Divergence (dynamic shapes, data-dependent paths),
// reported with the first position that differed. After the recording the framework may stop sending
// op events (needs_ops()), so later iterations are compared by sizes; the steady state then pays only
// for an allocation counter.
//
// Note [Window depth]
// Every op boundary could close a page window, but most ops are nested (aten::linear -> aten::t,
// aten::addmm -> ...) and each window costs the tracer a scan or a re-protect plus a fault per page
// touched in it. Only ops at nesting depth < window_depth (default 1: top-level ops, i.e. what the
// program called: a layer's op, an autograd node, the whole optimizer step) open and close windows; a
// deeper op's inputs, outputs and allocations count for the window it runs in. Every op is still
// recorded with its tensors; page counts are per window. TIERPACK_CONF page_window_depth:N refines
// it (measured costs: bench/profiler/profile_overhead.py).
//
// Note [Iteration boundaries]
// Three sources, in order of authority: explicit marks (tierpack.step()), optimizer-step marks (the end
// of the `Optimizer.step#...` scope) and periodicity of the allocation sequence. Once an explicit mark
// arrives, optimizer marks are ignored; once any mark arrives, periodicity detection stops; once
// periodicity has fixed the boundaries, marks are ignored (they would cut iterations differently).
// Periodicity (profiler/periodicity.hpp) looks for a period in the sequence of (allocation key, live
// bytes before it); live bytes keep repeated layers inside one forward pass from looking periodic,
// because activations pile up across layers but not across iterations.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/profile.hpp"
#include "core/tensor_record.hpp"
#include "profiler/page_join.hpp"
#include "profiler/page_tracer.hpp"

namespace tierpack {

enum class IterationSource : std::uint8_t { optimizer_step, explicit_mark, periodicity };
/// "optimizer-step", "explicit", "periodicity" (the names ProfileMeta::iteration_source uses).
std::string_view to_string(IterationSource s);

/// Where the program made an allocation (core's SourceLocation as views, valid during the call that
/// takes it: the framework side keeps its own copies, the recorder interns what it keeps).
struct SourceRef {
  std::string_view file;  ///< "" unknown
  std::int32_t line = 0;
  std::string_view function;
  std::string_view module = {};  ///< SourceLocation::module ("" none); a source without a file has none
  bool empty() const { return file.empty(); }
};

/// What the framework says a tensor is (see TensorFlags).
enum class TensorRole : std::uint8_t { saved_for_backward, parameter, gradient, optimizer_state };

struct RecorderOptions {
  int warmup_iterations = 1;    ///< iterations skipped before the profiled one
  int profile_iterations = 1;   ///< iterations compared to build the profile (the first is recorded)
  int max_iterations = 0;       ///< stop observing after this many iterations (0: until finish())
  bool detect_periodicity = true;
  std::size_t max_recorded_ops = 2'000'000;  ///< safety cap: recording stops (and says so) beyond it
  std::size_t window_depth = 1;   ///< ops nested this deep or deeper open no page window (Note [Window depth])
  std::string command;          ///< goes to ProfileMeta
  std::string framework;
  bool discover_topology = true;  ///< off: Profile::topology = `topology` below (tests)
  Topology topology;
  PageNodeQuery page_nodes;       ///< residency of host pages (query_page_nodes); empty: not read
  ExtentLookup page_extents;      ///< allocator extents to watch whole (page_join.hpp); empty: per tensor
};

/// Counters for status lines and tests.
struct RecorderStats {
  std::int32_t iterations = 0;       ///< iterations completed so far
  std::int32_t profiled_iteration = -1;
  bool recording = false;
  bool profile_ready = false;
  std::string iteration_source;      ///< "" until the first boundary
  std::uint64_t recorded_ops = 0;
  std::uint64_t recorded_tensors = 0;
  std::uint64_t live_allocations = 0;
  std::uint64_t ignored_marks = 0;   ///< marks of a lower-authority source (Note [Iteration boundaries])
  std::uint32_t divergent_iterations = 0;
  std::uint64_t page_windows = 0;    ///< page windows closed in the recording
  std::uint64_t watched_bytes = 0;   ///< bytes of address space the tracer watched (peak)
  PageTracerStats tracer;            ///< the tracer's own counters (faults, pages reported, ...)
  std::vector<std::string> warnings; ///< things that went wrong and were worked around
};

/// Thread-safe recorder of framework events. Event entry points are noexcept: a failure inside
/// (out of memory, a page tracer refusing a range) drops the affected data, adds a warning and
/// keeps the program running.
class EventRecorder {
 public:
  using OpToken = std::uint64_t;
  static constexpr OpToken kNoOp = 0;

  /// `tracer` (optional) watches host pages of trackable allocations during the profiled iteration.
  explicit EventRecorder(RecorderOptions options, std::unique_ptr<PageTracer> tracer = nullptr);
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  /// Starts observing; iteration 0 begins now. With warmup_iterations == 0 it also starts recording.
  void start();
  /// Cheap check for callers that must do work to build an event (collect input pointers).
  bool active() const noexcept {
    const auto s = state_.load(std::memory_order_relaxed);
    return s == kObserving || s == kRecording;
  }
  bool recording() const noexcept { return state_.load(std::memory_order_relaxed) == kRecording; }
  /// Whether op events are needed now: before and during the recording (allocating ops name tensors).
  /// After it, iterations are compared by allocation sizes alone and ops can be switched off.
  bool needs_ops() const noexcept {
    const auto s = state_.load(std::memory_order_relaxed);
    return s == kRecording || (s == kObserving && !recorded_.load(std::memory_order_relaxed));
  }

  /// Whether allocations should say where the program made them (`source` of alloc()): before and
  /// during the recording, so that tensors alive in the profiled iteration have one. Finding the
  /// source costs the framework side work (a Python stack walk): nothing asks for it afterwards.
  bool wants_sources() const noexcept { return needs_ops(); }

  /// An allocation of `bytes` at `ptr` on `device` (-1 host). `page_trackable`: the memory comes
  /// from page-aligned regions that hold nothing but tensors, so its pages can be traced. `source`:
  /// where the program made it (empty: unknown), becomes TensorRecord::source.
  void alloc(const void* ptr, std::size_t bytes, int device, std::uint64_t stream = 0,
             bool page_trackable = false, SourceRef source = {}) noexcept;
  void free(const void* ptr) noexcept;

  /// An op starts on the calling thread. `name` must stay valid until the matching op_end. `inputs`
  /// are data pointers (a pointer inside a live tensor, as views have, counts as that tensor).
  /// `phase` unknown: inherited from the enclosing op, forward at top level.
  OpToken op_begin(std::string_view name, std::span<const void* const> inputs = {},
                   Phase phase = Phase::unknown) noexcept;
  /// The op of `token` ends (ops nested inside it that did not end are closed with it).
  void op_end(OpToken token, std::span<const void* const> outputs = {}) noexcept;

  /// An iteration ended (Note [Iteration boundaries]).
  void mark_iteration(IterationSource source) noexcept;
  /// The framework says what the tensor holding `ptr` is; kept until it is freed.
  void mark(TensorRole role, const void* ptr) noexcept;
  /// Whether role marks are useful now (a live allocation can still be flagged in a profile).
  bool wants_marks() const noexcept { return active() && !profile_ready(); }

  /// True once the profiled iterations are complete and a profile can be written.
  bool profile_ready() const noexcept { return ready_.load(std::memory_order_acquire); }
  /// The profile of what was observed so far. If the profiled iteration is still being recorded it is
  /// closed here (the rest of the run is not recorded). Throws logic_error when no iteration was
  /// recorded (still in warm-up): the message says how many iterations were seen and how to fix it.
  Profile snapshot();
  /// Stops observing and returns snapshot().
  Profile finish();
  /// Stops observing without taking any lock (a forked child: the parent's threads may have held
  /// it at fork time). Nothing is recorded or written afterwards.
  void abandon() noexcept { state_.store(kDone); }

  /// Iterations completed so far, and the source of the last boundary (cheap, for status lines).
  std::int32_t iterations() const noexcept { return iterations_.load(std::memory_order_relaxed); }
  IterationSource last_source() const noexcept {
    return static_cast<IterationSource>(last_source_.load(std::memory_order_relaxed));
  }

  RecorderStats stats() const;
  const RecorderOptions& options() const { return options_; }

 private:
  static constexpr std::uint8_t kIdle = 0, kObserving = 1, kRecording = 2, kDone = 3;
  struct Impl;

  // Called with Impl::mu held.
  void start_recording();
  void stop_recording(bool partial);
  void build_profile();
  void end_iteration();
  void adopt_period();
  void finalize_pages(Profile& p);

  std::atomic<std::uint8_t> state_{kIdle};
  std::atomic<bool> ready_{false};
  std::atomic<bool> recorded_{false};
  std::atomic<std::int32_t> iterations_{0};
  std::atomic<std::uint8_t> last_source_{0};
  RecorderOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierpack
