// Session: the process-wide state of one tierpack-enabled training process, created explicitly by the
// framework integration (integrations/torch/c_api.cpp owns the one instance; tests create their own).
// It holds the Config, the profiler's EventRecorder and the memory source for CPU tensors, receives the
// framework's events and fans them out; it writes the profile when it is due.
//
// Note [Session fan-out]
// Runtimes plug in here, before start():
//   - set_host_memory(): who serves CPU tensor bytes. Default in profile mode: ProfilingArena
//     (page-aligned, trackable); the host runtime (alloc/host) replaces it with its page-group arenas.
//   - add_listener(): an EventListener gets every alloc/free/op/iteration event after the recorder
//     (migrate/ runtimes: trigger moves on op events; the GPU runtime: residency per iteration).
// Events arrive from any thread (autograd's backward threads included); every entry point is noexcept
// and cheap when nothing is active (relaxed atomic checks).
//
// Note [Profile write]
// When the profiled iterations are complete, a background thread takes the recorder's snapshot
// (short, under its lock) and does the slow part (topology discovery, JSON, the file) off the
// training thread. finish() joins it and rewrites the file if more iterations were observed since.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/config.hpp"
#include "core/process_rank.hpp"
#include "core/tensor_record.hpp"
#include "profiler/event_recorder.hpp"
#include "runtime/session/host_memory.hpp"

namespace tierpack {

/// Receives the framework's events (Note [Session fan-out]). Default implementations ignore them.
/// Called from framework threads: must not throw, should not block.
class EventListener {
 public:
  virtual ~EventListener() = default;
  virtual void on_alloc(const void* /*ptr*/, std::size_t /*bytes*/, int /*device*/, std::uint64_t /*stream*/) noexcept {}
  virtual void on_free(const void* /*ptr*/, int /*device*/) noexcept {}
  virtual void on_op_begin(std::string_view /*name*/, Phase /*phase*/) noexcept {}
  virtual void on_op_end(std::string_view /*name*/) noexcept {}
  /// An iteration ended (any source the recorder accepted).
  virtual void on_iteration(std::int32_t /*ended*/, IterationSource /*source*/) noexcept {}
  /// The process is shutting down or tierpack_finish() was called.
  virtual void on_finish() noexcept {}
  /// Whether it needs op events now (keeps the framework's op observer enabled).
  virtual bool wants_ops() const noexcept { return false; }
};

struct SessionOptions {
  std::string command;       ///< for the profile's meta (the process's command line)
  std::string framework;     ///< "torch 1.13.1", "libtorch 2.11.0"
  bool create_host_memory = true;  ///< create the ProfilingArena in profile mode (tests may not want it)
  bool discover_topology = true;
  std::optional<ProcessRank> rank;  ///< set under a distributed launcher: goes to the profile, prefixes status lines
};

class Session {
 public:
  using OpToken = EventRecorder::OpToken;

  /// Builds what `config` asks for: in profile (and run) mode the recorder with the page tracer of
  /// config.page_tracer (falling back with a status line when the kernel lacks it) and the profiling
  /// arena. Throws tierpack::error when a required part cannot be created.
  explicit Session(Config config, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // ---- plug-in points (Note [Session fan-out]); call before start() ----
  void set_host_memory(std::unique_ptr<HostMemory> memory);
  void add_listener(std::shared_ptr<EventListener> listener);

  /// Starts observing (iteration 0 begins) and prints the first status line.
  void start();

  const Config& config() const { return config_; }
  EventRecorder* recorder() { return recorder_.get(); }
  /// The memory source for new CPU tensors now: set while a profile is being recorded or a host
  /// runtime is installed; nullptr means "use the framework's own allocator".
  HostMemory* host_memory_for_new() noexcept;
  /// The installed source, for frees (whether or not new allocations still go to it).
  HostMemory* host_memory() noexcept { return host_memory_.get(); }
  /// Whether op events are wanted now (cheap).
  bool wants_ops() const noexcept;
  /// Whether op events should carry tensor pointers now (a profile is being recorded).
  bool wants_op_tensors() const noexcept { return recorder_ && recorder_->recording(); }
  /// Whether allocations should say where the program made them (EventRecorder::wants_sources()).
  bool wants_sources() const noexcept { return recorder_ && recorder_->wants_sources(); }
  /// Whether iteration marks are still useful (the recorder is observing).
  bool wants_iterations() const noexcept { return recorder_ && recorder_->active(); }
  /// Whether tensor-role marks (parameter, gradient, optimizer state) are wanted now.
  bool wants_marks() const noexcept { return recorder_ && recorder_->wants_marks(); }

  // ---- events ----
  /// `source`: where the program made it (empty: unknown; asked for only while wants_sources()).
  void on_alloc(const void* ptr, std::size_t bytes, int device, std::uint64_t stream, bool trackable,
                SourceRef source = {}) noexcept;
  void on_free(const void* ptr, int device) noexcept;
  OpToken op_begin(std::string_view name, std::span<const void* const> inputs, Phase phase) noexcept;
  void op_end(OpToken token, std::string_view name, std::span<const void* const> outputs) noexcept;
  void mark_iteration(IterationSource source) noexcept;
  void mark_tensor(TensorRole role, const void* ptr) noexcept;

  /// Writes what is due (the profile, with every iteration observed) and tells listeners. Idempotent;
  /// returns false when the profile could not be written (the reason was printed).
  bool finish() noexcept;
  /// One-line JSON: mode, iterations, recording, profile written, warnings.
  std::string status_json() const;
  /// "tierpack: <line>" on stderr unless config.log is quiet.
  void log(std::string_view line) const noexcept;

 private:
  void after_event() noexcept;
  bool write_profile_now(bool final) noexcept;

  Config config_;
  SessionOptions options_;
  std::unique_ptr<EventRecorder> recorder_;
  std::unique_ptr<HostMemory> host_memory_;
  std::vector<std::shared_ptr<EventListener>> listeners_;
  std::atomic<bool> started_{false};
  std::atomic<bool> finished_{false};
  std::atomic<bool> written_{false};
  std::atomic<bool> write_started_{false};
  std::thread writer_;  ///< writes the profile off the training thread (Note [Profile write])
  std::mutex writer_mu_;  ///< guards writer_: started on a framework thread, joined by finish()
  std::atomic<int> last_reported_{-2};  ///< recorder phase last announced
  std::mutex write_mu_;
  std::int32_t written_iterations_ = -1;
  std::string tracer_note_;
};

}  // namespace tierpack
