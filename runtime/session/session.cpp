// The Session (see session.hpp, Note [Session fan-out]).
#include "runtime/session/session.hpp"

#include <cstdio>
#include <exception>

#include "core/error.hpp"
#include "core/profile.hpp"
#include "core/units.hpp"
#include "profiler/page_tracer.hpp"
#include "runtime/session/profiling_arena.hpp"

namespace tierpack {
namespace {

std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

Session::Session(Config config, SessionOptions options) : config_(std::move(config)), options_(std::move(options)) {
  if (config_.mode == RunMode::off) return;
  if (config_.mode == RunMode::profile && config_.profile_out.empty())
    throw logic_error("TIERPACK_CONF: mode:profile needs profile_out:<file>");

  std::unique_ptr<PageTracer> tracer;
  if (config_.page_tracer != PageTracerKind::off) {
    try {
      std::string why;
      tracer = make_page_tracer(config_.page_tracer, &why);
      if (!why.empty()) tracer_note_ = why;
    } catch (const std::exception& e) {
      tracer_note_ = std::string("page tracer unavailable (") + e.what() + "): no page access data";
    }
  }
  RecorderOptions ro;
  ro.warmup_iterations = config_.warmup_iterations;
  ro.profile_iterations = config_.profile_iterations;
  ro.max_iterations = config_.max_iterations;
  ro.window_depth = static_cast<std::size_t>(config_.page_window_depth);
  ro.command = options_.command;
  ro.framework = options_.framework;
  ro.discover_topology = options_.discover_topology;
  ro.page_nodes = [](const std::vector<void*>& pages) { return query_page_nodes(pages); };
  // Watch whole extents of the CPU tensor memory (whatever HostMemory is installed at the time).
  ro.page_extents = [this](std::uintptr_t p) { return host_memory_ ? host_memory_->extent_of(p) : std::nullopt; };

  if (options_.create_host_memory) {
    try {
      host_memory_ = std::make_unique<ProfilingArena>();
    } catch (const std::exception& e) {
      log(std::string("no trackable memory for CPU tensors (") + e.what() +
          "): CPU tensors use the framework's allocator and get no page data");
    }
  }
  recorder_ = std::make_unique<EventRecorder>(std::move(ro), std::move(tracer));
}

Session::~Session() {
  std::lock_guard lock(writer_mu_);
  if (writer_.joinable()) writer_.join();
}

void Session::set_host_memory(std::unique_ptr<HostMemory> memory) {
  TIERPACK_EXPECTS(!started_.load(), "set_host_memory() after start()");
  host_memory_ = std::move(memory);
}

void Session::add_listener(std::shared_ptr<EventListener> listener) {
  TIERPACK_EXPECTS(!started_.load(), "add_listener() after start()");
  if (listener) listeners_.push_back(std::move(listener));
}

void Session::start() {
  if (started_.exchange(true)) return;
  if (!recorder_) return;
  recorder_->start();
  if (!tracer_note_.empty()) log(tracer_note_);
  if (config_.mode == RunMode::profile) {
    log("profiling: warm-up " + std::to_string(config_.warmup_iterations) + " iteration(s), then " +
        std::to_string(config_.profile_iterations) + " profiled; CPU tensors from " +
        (host_memory_ ? std::string(host_memory_->name()) : std::string("the framework's allocator")) +
        "; output " + config_.profile_out);
    if (config_.warmup_iterations == 0) log("recording from the start (no warm-up)");
  }
}

HostMemory* Session::host_memory_for_new() noexcept {
  if (!host_memory_) return nullptr;
  if (config_.mode == RunMode::run) return host_memory_.get();
  return recorder_ && recorder_->active() ? host_memory_.get() : nullptr;
}

bool Session::wants_ops() const noexcept {
  if (recorder_ && recorder_->needs_ops()) return true;
  for (const auto& l : listeners_)
    if (l->wants_ops()) return true;
  return false;
}

void Session::log(std::string_view line) const noexcept {
  if (config_.log == LogLevel::quiet) return;
  if (options_.rank)
    std::fprintf(stderr, "tierpack[rank %d]: %.*s\n", options_.rank->rank, static_cast<int>(line.size()), line.data());
  else
    std::fprintf(stderr, "tierpack: %.*s\n", static_cast<int>(line.size()), line.data());
}

// ---- events ---------------------------------------------------------------------------------------

void Session::on_alloc(const void* ptr, std::size_t bytes, int device, std::uint64_t stream, bool trackable,
                       SourceRef source) noexcept {
  if (recorder_) recorder_->alloc(ptr, bytes, device, stream, trackable, source);
  for (const auto& l : listeners_) l->on_alloc(ptr, bytes, device, stream);
}

void Session::on_free(const void* ptr, int device) noexcept {
  if (recorder_) recorder_->free(ptr);
  for (const auto& l : listeners_) l->on_free(ptr, device);
}

Session::OpToken Session::op_begin(std::string_view name, std::span<const void* const> inputs, Phase phase) noexcept {
  OpToken token = EventRecorder::kNoOp;
  if (recorder_) token = recorder_->op_begin(name, inputs, phase);
  for (const auto& l : listeners_) l->on_op_begin(name, phase);
  return token;
}

void Session::op_end(OpToken token, std::string_view name, std::span<const void* const> outputs) noexcept {
  if (recorder_) recorder_->op_end(token, outputs);
  for (const auto& l : listeners_) l->on_op_end(name);
  after_event();
}

void Session::mark_iteration(IterationSource source) noexcept {
  if (recorder_) recorder_->mark_iteration(source);
  after_event();
}

void Session::mark_tensor(TensorRole role, const void* ptr) noexcept {
  if (recorder_) recorder_->mark(role, ptr);
}

/// Status transitions and the profile write, checked after op ends and marks (periodic boundaries
/// happen inside allocations, where nothing slow should run).
void Session::after_event() noexcept {
  if (!recorder_) return;
  const std::int32_t it = recorder_->iterations();
  int seen = last_reported_.load(std::memory_order_relaxed);
  if (it != seen && last_reported_.compare_exchange_strong(seen, it)) {
    for (std::int32_t ended = std::max(seen, 0); ended < it; ++ended)
      for (const auto& l : listeners_) l->on_iteration(ended, recorder_->last_source());
    if (recorder_->recording() && it > 0)
      log("recording iteration " + std::to_string(it) + " (boundaries: " +
          std::string(to_string(recorder_->last_source())) + ")");
  }
  if (recorder_->profile_ready() && !config_.profile_out.empty() && !write_started_.load() &&
      !write_started_.exchange(true)) {
    // writer_ is assigned under writer_mu_, and not at all once finish() began (it joins the writer
    // under the same lock): a framework thread may get here while another thread runs finish().
    std::lock_guard lock(writer_mu_);
    if (finished_.load()) return;  // finish() writes the profile itself
    try {
      writer_ = std::thread([this] { write_profile_now(false); });
    } catch (const std::exception&) {
      write_profile_now(false);  // no thread to be had: write here
    }
  }
}

bool Session::write_profile_now(bool final) noexcept {
  std::lock_guard lock(write_mu_);
  try {
    if (!final && written_.load()) return true;
    const std::int32_t observed = recorder_->iterations();
    if (final && written_.load() && observed == written_iterations_) {
      (void)recorder_->finish();
      return true;
    }
    Profile p = final ? recorder_->finish() : recorder_->snapshot();
    if (options_.rank) {
      p.meta.rank = options_.rank->rank;
      p.meta.world_size = options_.rank->world_size;
    }
    write_profile(p, config_.profile_out);
    const bool update = written_.exchange(true);
    written_iterations_ = observed;
    if (!update) {
      std::size_t hidden = 0, shared = 0;
      for (const auto& t : p.tensors) hidden += t.has(kTensorHiddenAccess) ? 1 : 0;
      for (const auto& pg : p.pages) shared += pg.false_shared ? 1 : 0;
      log("profile written to " + config_.profile_out + ": iteration " + std::to_string(p.meta.profiled_iteration) +
          " (boundaries: " + p.meta.iteration_source + "), " + std::to_string(p.ops.size()) + " ops, " +
          std::to_string(p.tensors.size()) + " tensors, peak host " + format_bytes(p.peak_bytes(-1)) +
          ", page tracer " + p.meta.page_tracer + ", " + std::to_string(shared) + " falsely shared page(s), " +
          std::to_string(hidden) + " tensor(s) with hidden accesses");
    } else {
      log("profile updated: " + std::to_string(p.meta.iterations_observed) + " iterations observed");
    }
    if (final && !p.divergences.empty())
      log(std::to_string(p.divergences.size()) + " iteration(s) diverged from the profiled one; first: iteration " +
          std::to_string(p.divergences.front().iteration) + ": " + p.divergences.front().reason);
    if (final) {
      const auto st = recorder_->stats();
      for (const auto& w : st.warnings) log("warning: " + w);
      if (config_.log == LogLevel::debug)
        log("page tracer " + p.meta.page_tracer + ": " + std::to_string(st.page_windows) + " windows, " +
            format_bytes(st.watched_bytes) + " watched, " + std::to_string(st.tracer.pages_reported) +
            " pages reported, " + std::to_string(st.tracer.faults) + " faults, " +
            std::to_string(st.tracer.dropped) + " dropped, " + std::to_string(st.tracer.rearm_failures) +
            " re-arm failures");
    }
    return true;
  } catch (const std::exception& e) {
    log(std::string("profile not written: ") + e.what());
    return false;
  }
}

bool Session::finish() noexcept {
  if (finished_.exchange(true)) return written_.load() || !recorder_;
  write_started_.store(true);  // no new writer thread from here on
  std::thread writer;
  {
    std::lock_guard lock(writer_mu_);
    writer = std::move(writer_);
  }
  if (writer.joinable()) {
    try {
      writer.join();
    } catch (const std::exception&) {
    }
  }
  bool ok = true;
  if (recorder_ && !config_.profile_out.empty()) ok = write_profile_now(true);
  for (const auto& l : listeners_) l->on_finish();
  return ok;
}

std::string Session::status_json() const {
  std::string s = "{\"mode\":\"";
  s += config_.mode == RunMode::off ? "off" : config_.mode == RunMode::profile ? "profile" : "run";
  s += "\"";
  if (recorder_) {
    const auto st = recorder_->stats();
    s += ",\"iterations\":" + std::to_string(st.iterations);
    s += ",\"profiled_iteration\":" + std::to_string(st.profiled_iteration);
    s += std::string(",\"recording\":") + (st.recording ? "true" : "false");
    s += std::string(",\"profile_ready\":") + (st.profile_ready ? "true" : "false");
    s += std::string(",\"profile_written\":") + (written_.load() ? "true" : "false");
    s += ",\"iteration_source\":\"" + json_escape(st.iteration_source) + "\"";
    s += ",\"divergent_iterations\":" + std::to_string(st.divergent_iterations);
    s += ",\"warnings\":[";
    for (std::size_t i = 0; i < st.warnings.size(); ++i)
      s += (i ? ",\"" : "\"") + json_escape(st.warnings[i]) + "\"";
    s += "]";
  }
  s += ",\"host_memory\":\"" + (host_memory_ ? std::string(host_memory_->name()) : std::string("default")) + "\"";
  s += ",\"profile_out\":\"" + json_escape(config_.profile_out) + "\"}";
  return s;
}

}  // namespace tierpack
