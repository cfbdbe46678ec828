// RunPhases (see phases.hpp).
#include "runtime/phases.hpp"

#include <string>

#include "core/error.hpp"

namespace tierpack {

const char* to_string(RunPhase p) {
  switch (p) {
    case RunPhase::warmup: return "warm-up";
    case RunPhase::recording: return "recording";
    case RunPhase::planned: return "planned";
    case RunPhase::suspended: return "suspended";
    case RunPhase::off: return "off";
  }
  return "?";
}

RunPhases::RunPhases(RunPhaseOptions options) : options_(options) {}

void RunPhases::record() {
  if (phase_ != RunPhase::warmup)
    throw logic_error(std::string("run phases: recording starts after the warm-up, not in ") + to_string(phase_));
  phase_ = RunPhase::recording;
  recorded_ = 0;
}

void RunPhases::follow() {
  if (phase_ != RunPhase::warmup && phase_ != RunPhase::recording)
    throw logic_error(std::string("run phases: a plan comes into force after the warm-up or the recording, not in ") +
                      to_string(phase_));
  phase_ = RunPhase::planned;
  streak_ = 0;
}

void RunPhases::turn_off() noexcept { phase_ = RunPhase::off; }

bool RunPhases::diverge() noexcept {
  if (phase_ != RunPhase::planned) return false;
  phase_ = ++streak_ >= options_.divergence_limit ? RunPhase::off : RunPhase::suspended;
  return phase_ == RunPhase::off;
}

void RunPhases::end_iteration() noexcept {
  switch (phase_) {
    case RunPhase::planned: streak_ = 0; break;
    case RunPhase::suspended: phase_ = RunPhase::planned; break;
    case RunPhase::recording: ++recorded_; break;
    case RunPhase::warmup:
    case RunPhase::off: break;
  }
}

}  // namespace tierpack
