// The simulated copy engine: page-group copies between the fast and the slow tier, one at a time per
// direction in the order they were issued (a copy stream per direction, or one shared queue on a
// half-duplex link). Each copy first pays the fixed migration overhead, then moves its bytes; when
// both directions move bytes at once on a full-duplex link, each gets its share of the both-ways
// bandwidth. A copy to the fast tier starts only when the owner says its destination memory is free.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>

#include "placer/cost_model.hpp"

namespace tierpack::placer {

class CopyEngine {
 public:
  struct Hooks {
    std::function<bool(std::size_t job)> can_start;         ///< copies to the fast tier: is memory free?
    std::function<void(std::size_t job, double t)> started;
    std::function<void(std::size_t job, double t)> finished;
  };
  static constexpr double kNever = std::numeric_limits<double>::infinity();

  CopyEngine(const CostModel& cost, Hooks hooks);

  /// Queues a copy, ready at the engine's current time.
  void submit(std::size_t job, bool to_fast, std::uint64_t bytes);
  /// Runs copies until time t (kNever: until nothing can run).
  void advance_to(double t);
  /// Time of the next event (a copy finishing or leaving its setup); kNever when nothing runs.
  double next_event();
  /// Lets the copy at the head of the fast-tier queue start without waiting for memory (used only to
  /// break a deadlock; the owner counts it as a budget overrun). False when there is none waiting.
  bool force_next();
  double now() const { return now_; }
  bool idle() const;

 private:
  struct Job {
    std::size_t id = 0;
    bool to_fast = false;
    std::uint64_t bytes = 0;
  };
  struct Active {
    bool busy = false;
    Job job;
    double setup_left = 0, bytes_left = 0;
  };
  std::size_t channel_of(bool to_fast) const { return cost_.full_duplex ? (to_fast ? 0 : 1) : 0; }
  void start_ready();
  double rate(std::size_t ch) const;
  double time_to_event(std::size_t ch) const;

  const CostModel& cost_;
  Hooks hooks_;
  std::deque<Job> queue_[2];
  Active active_[2];
  double now_ = 0;
  bool force_ = false;
};

}  // namespace tierpack::placer
