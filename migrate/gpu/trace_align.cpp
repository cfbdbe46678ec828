// Aligning an observed iteration with a reference one (see Note [Observed and reference
// iterations] in trace_align.hpp).
#include "migrate/gpu/trace_align.hpp"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "core/error.hpp"

namespace tierpack::gpu {
namespace {

struct Key {
  bool alloc;
  std::uint64_t bytes;
  bool operator==(const Key&) const = default;
};

std::vector<Key> keys(const IterationTrace& t) {
  std::vector<Key> k;
  k.reserve(t.events.size());
  for (const TraceEvent& e : t.events) k.push_back({e.alloc, t.tensors.at(e.tensor).bytes});
  return k;
}

}  // namespace

std::string AlignmentStats::summary() const {
  return std::to_string(matched_events) + " of " + std::to_string(reference_events) +
         " reference events matched the observed iteration's " + std::to_string(observed_events) + "; " +
         std::to_string(unmatched_tensors) + " tensors without observed uses stay put";
}

IterationTrace align_traces(const IterationTrace& observed, const IterationTrace& reference, AlignmentStats* stats) {
  const std::vector<Key> a = keys(observed), b = keys(reference);
  // match[i] = reference event index of observed event i, or npos: a longest common subsequence
  // (Myers' O((N+M)D) diff; D, the number of differing events, is small in practice).
  constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> match(a.size(), npos);
  std::size_t matched = 0;
  const auto N = static_cast<std::int64_t>(a.size()), M = static_cast<std::int64_t>(b.size());
  const std::int64_t max_d = std::min<std::int64_t>(N + M, 6000);
  const std::int64_t off = max_d + 1;
  std::vector<std::int64_t> v(static_cast<std::size_t>(2 * off + 2), 0);
  std::vector<std::vector<std::int64_t>> trace;  // v before each round d
  bool found = false;
  std::int64_t d_end = 0;
  for (std::int64_t d = 0; d <= max_d && !found; ++d) {
    trace.push_back(v);
    for (std::int64_t k = -d; k <= d; k += 2) {
      std::int64_t x = (k == -d || (k != d && v[off + k - 1] < v[off + k + 1])) ? v[off + k + 1] : v[off + k - 1] + 1;
      std::int64_t y = x - k;
      while (x < N && y < M && a[x] == b[y]) ++x, ++y;
      v[off + k] = x;
      if (x >= N && y >= M) {
        found = true;
        d_end = d;
        break;
      }
    }
  }
  if (found) {
    std::int64_t x = N, y = M;
    for (std::int64_t d = d_end; d >= 0 && (x > 0 || y > 0); --d) {
      const std::vector<std::int64_t>& vd = trace[static_cast<std::size_t>(d)];
      const std::int64_t k = x - y;
      std::int64_t pk;
      if (d == 0) pk = k;
      else pk = (k == -d || (k != d && vd[off + k - 1] < vd[off + k + 1])) ? k + 1 : k - 1;
      const std::int64_t px = d == 0 ? 0 : vd[off + pk], py = px - pk;
      const std::int64_t sx = d == 0 ? 0 : (pk == k + 1 ? px : px + 1);  // start of this round's snake
      while (x > sx && y > sx - k) {
        --x, --y;
        TIERPACK_EXPECTS(a[static_cast<std::size_t>(x)] == b[static_cast<std::size_t>(y)], "alignment matched unequal events");
        match[static_cast<std::size_t>(x)] = static_cast<std::size_t>(y);
        ++matched;
      }
      x = px;
      y = py;
    }
  }
  // Observed clock -> reference clock. Clock c means "c events have happened".
  const std::size_t n = a.size();
  std::vector<std::int64_t> before(n + 1, 0), after(n + 1, static_cast<std::int64_t>(b.size()));
  for (std::size_t c = 0; c <= n; ++c) {
    before[c] = c == 0 ? 0 : before[c - 1];
    if (c > 0 && match[c - 1] != npos) before[c] = static_cast<std::int64_t>(match[c - 1]) + 1;
  }
  for (std::size_t c = n + 1; c-- > 0;) {
    if (c < n) after[c] = after[c + 1];
    if (c > 0 && match[c - 1] != npos) after[c] = static_cast<std::int64_t>(match[c - 1]) + 1;
  }
  auto clamp_clock = [&](std::int64_t c) { return static_cast<std::size_t>(std::clamp<std::int64_t>(c, 0, static_cast<std::int64_t>(n))); };

  IterationTrace out = reference;
  for (TracedTensor& t : out.tensors) t.uses.clear();
  std::vector<bool> has(out.tensors.size(), false);
  auto translate = [&](const TracedTensor& from, TracedTensor& to) {
    for (const TracedUse& u : from.uses)
      to.uses.push_back({before[clamp_clock(u.from)], after[clamp_clock(u.to)]});
  };
  // In-iteration tensors: through matched allocation events.
  for (std::size_t k = 0; k < n; ++k) {
    if (match[k] == npos || !observed.events[k].alloc) continue;
    const TraceEvent& re = reference.events[match[k]];
    translate(observed.tensors[observed.events[k].tensor], out.tensors[re.tensor]);
    has[re.tensor] = true;
  }
  // Carried tensors: by address.
  std::unordered_map<std::uint64_t, std::uint32_t> carried;
  for (std::uint32_t k = 0; k < observed.tensors.size(); ++k)
    if (observed.tensors[k].seq < 0) carried[observed.tensors[k].address] = k;
  for (std::uint32_t k = 0; k < out.tensors.size(); ++k) {
    TracedTensor& t = out.tensors[k];
    if (t.seq >= 0) continue;
    auto it = carried.find(t.address);
    if (it != carried.end() && observed.tensors[it->second].bytes == t.bytes) {
      translate(observed.tensors[it->second], t);
      has[k] = true;
    }
  }
  std::size_t unmatched = 0;
  for (std::uint32_t k = 0; k < out.tensors.size(); ++k) {
    // A tensor no observed op touched is used by kernels the observer cannot see (cuBLAS
    // workspaces, buffers inside fused kernels): it is pinned, and so is any segment holding it.
    if (has[k] && !out.tensors[k].uses.empty()) continue;
    TracedTensor& t = out.tensors[k];
    t.uses = {{t.birth, t.death < 0 ? out.clock_end : t.death}};  // unknown: used all its life
    ++unmatched;
  }
  if (stats) {
    stats->matched_events = matched;
    stats->observed_events = a.size();
    stats->reference_events = b.size();
    stats->unmatched_tensors = unmatched;
  }
  return out;
}

}  // namespace tierpack::gpu
