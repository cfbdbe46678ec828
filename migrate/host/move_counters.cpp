// MoveCounters: accumulation, summary line, JSON.
#include "migrate/host/move_counters.hpp"

#include <cerrno>

#include <nlohmann/json.hpp>

#include "core/units.hpp"

namespace tierpack::host {

void MoveCounters::add(const MoveCounters& o) {
  bytes_to_fast += o.bytes_to_fast;
  bytes_to_slow += o.bytes_to_slow;
  moves_submitted += o.moves_submitted;
  moves_complete += o.moves_complete;
  moves_partial += o.moves_partial;
  moves_late += o.moves_late;
  moves_dropped += o.moves_dropped;
  moves_empty += o.moves_empty;
  moves_over_budget += o.moves_over_budget;
  pages_moved += o.pages_moved;
  pages_absent += o.pages_absent;
  pages_zero += o.pages_zero;
  pages_retried += o.pages_retried;
  pages_failed += o.pages_failed;
  for (const auto& [err, n] : o.failures_by_errno) failures_by_errno[err] += n;
}

static std::string errno_name(int err) {
  switch (err) {
    case 0: return "unmoved";
    case EBUSY: return "EBUSY";
    case EACCES: return "EACCES";
    case EFAULT: return "EFAULT";
    case ENOMEM: return "ENOMEM";
    case EIO: return "EIO";
    case EINVAL: return "EINVAL";
    case EAGAIN: return "EAGAIN";
    case ENOENT: return "ENOENT";
    case EPERM: return "EPERM";
    default: return "errno " + std::to_string(err);
  }
}

std::string MoveCounters::summary() const {
  std::string s = "moved " + format_bytes(bytes_to_fast) + " to fast, " + format_bytes(bytes_to_slow) + " to slow in " +
                  std::to_string(moves_complete + moves_partial) + " moves; " + std::to_string(moves_late) + " late prefetch(es)";
  if (moves_partial > 0 || !failures_by_errno.empty()) {
    s += "; " + std::to_string(moves_partial) + " partial (";
    bool first = true;
    for (const auto& [err, n] : failures_by_errno) {
      s += (first ? "" : ", ") + errno_name(err) + " x" + std::to_string(n);
      first = false;
    }
    s += ")";
  }
  if (moves_dropped > 0) s += "; " + std::to_string(moves_dropped) + " dropped";
  if (moves_over_budget > 0) s += "; " + std::to_string(moves_over_budget) + " prefetch(es) left on the slow tier for lack of room";
  if (pages_zero > 0) s += "; " + std::to_string(pages_zero) + " zero/unmapped pages skipped";
  return s;
}

void to_json(nlohmann::json& j, const MoveCounters& c) {
  nlohmann::json errs = nlohmann::json::object();
  for (const auto& [err, n] : c.failures_by_errno) errs[errno_name(err)] = n;
  j = nlohmann::json{{"bytes_to_fast", c.bytes_to_fast},   {"bytes_to_slow", c.bytes_to_slow},
                     {"moves_submitted", c.moves_submitted}, {"moves_complete", c.moves_complete},
                     {"moves_partial", c.moves_partial},   {"moves_late", c.moves_late},
                     {"moves_dropped", c.moves_dropped},   {"moves_empty", c.moves_empty},
                     {"moves_over_budget", c.moves_over_budget},
                     {"pages_moved", c.pages_moved},       {"pages_absent", c.pages_absent},
                     {"pages_zero", c.pages_zero},
                     {"pages_retried", c.pages_retried},   {"pages_failed", c.pages_failed},
                     {"failures_by_errno", errs}};
}

}  // namespace tierpack::host
