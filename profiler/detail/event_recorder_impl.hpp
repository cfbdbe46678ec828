// EventRecorder::Impl, the recorder's state behind its mutex, and the helpers its files share:
//   event_recorder.cpp             construction, start, and the results (snapshot, finish, stats)
//   event_recorder_events.cpp      the framework's events: allocations, frees, role marks, ops
//   event_recorder_iterations.cpp  iteration boundaries (Note [Iteration boundaries]) and divergence
//                                  from the profiled iteration (Note [Tensor identity])
//   event_recorder_recording.cpp   the profiled iteration: start and stop of the recording, the Profile
//                                  built from it
// Private to profiler/.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "profiler/event_recorder.hpp"
#include "profiler/page_join.hpp"
#include "profiler/periodicity.hpp"

namespace tierpack::detail {

inline std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline constexpr std::uint64_t kSeed = 0x7469657270616b31ull;  // "tierpak1"

struct NameHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

inline SourceRef as_ref(const SourceLocation& s) { return {s.file, s.line, s.function, s.module}; }
inline const SourceRef& as_ref(const SourceRef& s) { return s; }

/// Allocation sources keyed by content; lookups with a SourceRef build no string.
struct SourceHash {
  using is_transparent = void;
  template <class S>
  std::size_t operator()(const S& s) const {
    const SourceRef r = as_ref(s);
    return std::hash<std::string_view>{}(r.file) ^ (std::hash<std::string_view>{}(r.function) * 31) ^
           (std::hash<std::string_view>{}(r.module) * 131) ^
           (static_cast<std::size_t>(r.line) * 0x9e3779b97f4a7c15ull);
  }
};
struct SourceEq {
  using is_transparent = void;
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    const SourceRef x = as_ref(a), y = as_ref(b);
    return x.line == y.line && x.file == y.file && x.function == y.function && x.module == y.module;
  }
};

}  // namespace tierpack::detail

namespace tierpack {

struct EventRecorder::Impl {
  using NameHash = detail::NameHash;
  using SourceHash = detail::SourceHash;
  using SourceEq = detail::SourceEq;

  // ---- everything below is guarded by mu ----
  std::mutex mu;
  std::unique_ptr<PageTracer> tracer;
  std::unique_ptr<PageJoin> join;
  std::size_t page_size = 4096;

  // Op names, interned: id 0 is "" (no op).
  std::unordered_map<std::string, std::uint32_t, NameHash, std::equal_to<>> name_ids;
  std::vector<std::string> names{""};
  std::vector<std::uint64_t> name_hashes{0};

  // Allocation sources, interned: index into `sources` (-1 unknown). Kept for the whole run (live
  // tensors born in warm-up refer to them); build_profile() copies the ones the profile uses.
  std::unordered_map<SourceLocation, std::int32_t, SourceHash, SourceEq> source_ids;
  std::vector<SourceLocation> sources;

  struct Live {
    std::uint64_t bytes = 0;
    int device = -1;
    std::uint64_t stream = 0;
    std::uint32_t name = 0;
    std::int32_t source = -1;
    std::uint32_t flags = 0;
    std::int64_t tensor = -1;  ///< id in the recorded iteration, -1 if not part of it
    bool trackable = false;
  };
  std::map<std::uintptr_t, Live> live;
  std::map<int, std::uint64_t> live_bytes;

  struct Frame {
    OpToken token = kNoOp;
    std::string_view name;
    std::int32_t op = -1;  ///< recorded op index, -1 outside recording
    Phase phase = Phase::forward;
  };
  struct Thread {
    std::vector<Frame> stack;
    std::int32_t number = -1;  ///< small number in the recorded iteration
  };
  std::unordered_map<std::thread::id, Thread> threads;
  OpToken next_token = 1;

  // Current iteration.
  std::int32_t iteration = 0;
  std::uint64_t iter_start = 0;
  struct DevSeq {
    std::int64_t count = 0;
    std::uint64_t hash = detail::kSeed;
  };
  std::map<int, DevSeq> seqs;
  std::uint32_t iter_allocs = 0;
  bool iter_diverged = false;
  std::vector<IterationInfo> infos;
  std::optional<IterationSource> source;
  bool explicit_seen = false;
  bool any_mark = false;
  std::uint64_t ignored_marks = 0;
  std::uint64_t total_allocs = 0;

  // Periodicity (Note [Iteration boundaries]).
  std::unique_ptr<PeriodDetector> detector;
  struct HistEntry {
    int device;
    std::uint64_t bytes;  ///< hashed into the per-device signature
    std::uint64_t t;
  };
  std::vector<HistEntry> history;
  std::uint64_t period = 0;
  std::uint64_t next_boundary = 0;

  // The profiled iteration, and what later iterations are compared with.
  std::int32_t profiled = -1;
  std::uint64_t rec_start = 0;
  struct OpBuild {
    std::uint32_t name = 0;
    std::uint64_t begin = 0, end = 0;
    std::uint32_t thread = 0;
    std::int32_t parent = -1;
    Phase phase = Phase::unknown;
    std::vector<std::uint32_t> in, out;
    std::vector<std::uint32_t> made;  ///< tensors allocated while it ran (top-level ops only; windows)
  };
  std::vector<OpBuild> ops;
  std::vector<TensorRecord> tensors;
  std::vector<std::uint32_t> tensor_names;
  std::vector<std::uint32_t> window_used;  ///< used by ops (any depth) and allocated since the last window
  std::vector<std::uint32_t> used;  // scratch
  std::int32_t last_op = -1;
  std::int32_t thread_count = 0;
  bool recorded = false;
  bool partial = false;
  bool finalized = false;  ///< topology and page join applied to `built`
  Profile built;
  std::uint64_t profiled_signature = 0;
  std::string profile_id;  ///< drawn at the first snapshot, kept for every later one (Note [Profile identity])
  // The recorded iteration between stop_recording() and the first snapshot() (build_profile()).
  std::vector<OpBuild> done_ops;
  std::vector<TensorRecord> done_tensors;
  std::vector<std::uint32_t> done_names;
  std::uint64_t iteration_end = 0;
  bool build_pending = false;
  std::map<int, std::vector<std::pair<std::uint64_t, std::uint32_t>>> ref;  ///< device -> seq -> (bytes, op)
  std::vector<Divergence> divergences;
  std::uint32_t divergent = 0;
  std::vector<std::string> warnings;
  std::uint64_t page_windows = 0, watched_bytes = 0;

  void warn(std::string text) {
    if (warnings.size() < 32) warnings.push_back(std::move(text));
  }

  // ---- names, sources, threads and live allocations (event_recorder_events.cpp)
  std::uint32_t intern(std::string_view name);
  std::int32_t intern_source(const SourceRef& s);
  Thread& this_thread();
  const std::uint64_t serial = next_serial();
  static std::uint64_t next_serial();
  std::uint64_t alloc_key(std::uint64_t bytes, std::uint32_t name) const;
  Live* find_containing(const void* p);
  void resolve(std::span<const void* const> ptrs, std::vector<std::uint32_t>& out);
  std::vector<std::uint32_t>& active_set();
  void close_window();

  // ---- iterations and divergence (event_recorder_iterations.cpp)
  std::uint64_t iteration_signature() const;
  void check_alloc(int device, std::int64_t seq, std::uint64_t bytes, std::uint32_t name);
  void check_counts();
  void diverge(std::int64_t seq, std::string reason);
};

}  // namespace tierpack
