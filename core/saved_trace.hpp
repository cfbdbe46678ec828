// SavedTrace and SavedPlan: the values between the GPU tier's storage mover and the placer.
//
// The storage mover (python/tierpack/activations.py, Note [Storage moves]; recording.py) records one training
// iteration as a SavedTrace: every storage autograd saved for backward, and every pack and unpack of
// it, with the GPU time and the live bytes of PyTorch's allocator at that point. The placer
// (placer/saved_plan.hpp) turns it into a SavedPlan under a budget: which storages leave the device,
// at which event they are released, at which event their copy back starts. Both travel as JSON through
// the C ABI (tierpack_plan_saved in integrations/cuda/cuda_c_api.cpp); the readers check every
// field's range and name the field that is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tierpack {

/// One storage saved for backward in the recorded iteration (views of one storage share it).
struct SavedStorage {
  std::uint64_t bytes = 0;  ///< the whole storage: what one copy moves
  bool movable = true;      ///< false: never leaves (a parameter's storage, too small, saved in backward)
  /// >= 0: the runtime can make the storage again at its use from `recompute_from` (and parameters) in
  /// about this much GPU time, bit for bit (placer/saved_plan.cpp, Note [Recompute]); < 0: it cannot.
  double recompute_ms = -1;
  std::vector<std::int32_t> recompute_from;  ///< storages the recomputation reads (indexes into storages)
  /// >= 0: one run makes every storage of this group made again at the same call (a module's call makes
  /// all it saved: python/tierpack/module_recompute.py), so their recompute_ms, each the whole run's, is
  /// spent once there (placer/saved_plan.cpp, Note [Recompute cost]); < 0: a recomputation of its own.
  std::int32_t recompute_group = -1;
  /// >= 0: the block (SavedTrace::blocks) whose call saved it: running that block's forward again makes it
  /// too (placer/saved_plan.cpp, Note [Block recompute]); < 0: saved outside every block.
  std::int32_t block = -1;
  /// Another owner holds the storage until forward ends (autocast's cache of a parameter's cast): let go
  /// before the iteration's first unpack, its bytes stay on the device (placer/saved_plan.cpp, Note
  /// [Storage move plan]).
  bool held_in_forward = false;
  /// >= 0: the program itself holds the storage until this call (a residual connection's input, a variable the
  /// forward keeps): let go before it, its bytes stay on the device until then, so the plan lets it go no earlier
  /// (measured by the runtime where a storage it let go was not freed: placer/saved_plan.cpp, Note [Held
  /// storages]); < 0: nothing else was seen holding it.
  std::int32_t held_until = -1;
  /// An optimizer state tensor's storage (AdamW's exp_avg, exp_avg_sq): used by the optimizer step alone (python/
  /// tierpack/optimizer_state.py, Note [Optimizer state]); with a streamed step it comes back during the step, a
  /// chunk at a time (placer/saved_plan.cpp, Note [Streamed step]).
  bool optimizer_state = false;

  friend bool operator==(const SavedStorage&, const SavedStorage&) = default;
};

/// One call of a block (a repeated module with matmuls or convolutions: a transformer layer, a ResNet
/// bottleneck) whose forward the runtime can run again, bit for bit, making every storage it saved
/// (python/tierpack/module_recompute.py, Note [Block recompute]).
struct SavedBlock {
  double ms = 0;                   ///< GPU time of one run of its forward
  std::vector<std::int32_t> from;  ///< storages the run reads (its inputs; they stay on the device)
  /// Host time of one run: Python launching its forward again (placer/saved_plan.cpp, Note [Host time]).
  double host_ms = 0;
  /// Live bytes one run adds beyond the members it makes again (its output, the temporaries of its forward), at
  /// the call where it runs (placer/saved_plan.cpp, Note [Block run memory]); 0: not measured.
  std::uint64_t extra_bytes = 0;

  friend bool operator==(const SavedBlock&, const SavedBlock&) = default;
};

enum class SavedEventKind { pack, unpack };

/// A pack or unpack call, in the order autograd made them (forward, then backward).
struct SavedEvent {
  SavedEventKind kind = SavedEventKind::pack;
  std::int32_t storage = 0;       ///< index into SavedTrace::storages
  double t_ms = 0;                ///< GPU time of the compute stream at this call, from the forward's start
  std::uint64_t live = 0;         ///< live bytes (PyTorch's allocated) at this call
  std::uint64_t window_peak = 0;  ///< most live bytes from this call to the next one (the last: to the step's end)
  /// Host time at this call from the forward's start, in an iteration without moves; < 0: not measured (the
  /// cost model then leaves the host out: placer/saved_plan.cpp, Note [Host time]).
  double host_ms = -1;

  friend bool operator==(const SavedEvent&, const SavedEvent&) = default;
};

/// One recorded iteration (Note [Storage moves]).
struct SavedTrace {
  std::vector<SavedStorage> storages;
  std::vector<SavedEvent> events;
  std::vector<SavedBlock> blocks;   ///< blocks the runtime can run again (SavedStorage::block); may be empty
  double step_ms = 0;               ///< GPU time from the forward's start to the optimizer step's end
  double optimizer_ms = 0;          ///< GPU time of the optimizer step (the end of step_ms)
  std::uint64_t context_bytes = 0;  ///< device memory the process holds outside PyTorch's allocator

  friend bool operator==(const SavedTrace&, const SavedTrace&) = default;
};

/// What the placer plans for (placer/saved_plan.hpp).
struct SavedPlanOptions {
  std::uint64_t limit_bytes = 0;                     ///< live bytes to stay under at every call
  double d2h_bytes_per_s = 0;                        ///< measured pinned copy bandwidth, device to host
  double h2d_bytes_per_s = 0;                        ///< and host to device
  std::uint64_t min_bytes = std::uint64_t{1} << 20;  ///< smaller storages never move
  bool recompute = true;  ///< let go the storages the runtime can make again first (Note [Recompute])
  /// Host time the runtime's hooks spend per copy issued (out or back) and per recomputation run by its recipe
  /// or module, as measured in a planned iteration (placer/saved_plan.cpp, Note [Host time]); 0: not known.
  double host_ms_per_copy = 0;
  double host_ms_per_remake = 0;
  /// > 0: the runtime streams the optimizer step (placer/saved_plan.cpp, Note [Streamed step]): optimizer state
  /// storages are fetched by the step itself, a chunk at a time, and the step holds at most this many bytes of
  /// them at once; 0: the step needs every state back on the device before it starts.
  std::uint64_t stream_window_bytes = 0;
  /// Pinned copy bandwidth with both directions at once, the two together (bytes/s; 0: not known, each direction
  /// keeps its own). The streamed step copies both ways at once (placer/saved_plan.cpp, Note [Streamed step]).
  double both_ways_bytes_per_s = 0;
};

/// What happens to one storage that leaves the device. Event indexes refer to SavedTrace::events.
struct SavedMove {
  std::int32_t storage = 0;
  std::int32_t copy_at = 0;     ///< its pack: the copy out starts (after the compute queued so far)
  std::int32_t release_at = 0;  ///< the device storage is let go here (compute waits for the copy out)
  std::int32_t fetch_at = -1;   ///< the copy back is allocated and started here; -1: never used again
  std::int32_t use_at = -1;     ///< its first unpack (compute waits for the copy back); -1: none
  /// Made again at its use instead of copied (no copy out; fetch_at = use_at: Note [Recompute]).
  bool recompute = false;
  /// Made again by running its block (SavedStorage::block) rather than by its own recipe; with recompute.
  bool by_block = false;

  friend bool operator==(const SavedMove&, const SavedMove&) = default;
};

/// The placer's answer for one budget.
struct SavedPlan {
  std::uint64_t limit_bytes = 0;  ///< live bytes the plan keeps under
  std::vector<SavedMove> moves;   ///< in the order of their copies out
  std::uint64_t bytes_out = 0;    ///< copied out per iteration (= bytes back, but for never-used ones)
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_recomputed = 0;  ///< let go and made again at their use (no copy)
  std::uint64_t bytes_needed = 0;  ///< the most live bytes over the limit at any event, without moves
  std::uint64_t planned_peak = 0;  ///< the most live bytes at any event with the moves
  bool fits = true;                ///< false: some event stays over the limit (nothing left to move)
  std::int32_t over_at = -1;       ///< the first event over the limit when !fits
  double predicted_ms = 0;         ///< the step with the moves' stalls (cost model, Note [Storage move cost])
  double stall_ms = 0;             ///< of which compute waits for copies
  double bound_ms = 0;             ///< the transfer bound at this limit (Note [Transfer bound])

  friend bool operator==(const SavedPlan&, const SavedPlan&) = default;
};

/// What the GPU tier writes beside its statistics once it plans (<stats>.gpu<N>.saved.json): the recorded
/// iteration, the options it planned with and the plan, for `tierpack gpu-replay` (docs/formats.md).
struct SavedRecord {
  std::uint64_t budget = 0;  ///< the allocator's budget, bytes
  double fill = 0.95;        ///< the plan's limit is this fraction of the budget
  SavedTrace trace;
  SavedPlanOptions options;
  /// What the plan's first iteration measured of the storages it made again (python/tierpack/measured_plans.py,
  /// Note [Measured recomputation]); measured_iteration < 0: nothing measured yet.
  struct Measured {
    std::int32_t storage = 0;
    double predicted_ms = 0, measured_ms = 0;
  };
  std::int32_t measured_iteration = -1;
  std::vector<Measured> measured;
};
SavedRecord saved_record_from_json(const std::string& text);  ///< throws format_error naming the bad field

/// JSON text of the values (docs/formats.md, "Saved-tensor trace and plan").
std::string saved_trace_to_json(const SavedTrace& trace);
SavedTrace saved_trace_from_json(const std::string& text);               ///< throws format_error naming the bad field
SavedPlanOptions saved_plan_options_from_json(const std::string& text);  ///< throws format_error
std::string saved_plan_to_json(const SavedPlan& plan);
SavedPlan saved_plan_from_json(const std::string& text);  ///< throws format_error naming the bad field

}  // namespace tierpack
