// PeriodDetector: finds the iteration period of a training loop from its allocation sequence alone,
// for programs that give no iteration marks (a LibTorch program without tierpack::step(), a custom
// optimizer). Fed one value per allocation; reports once it is confident, with the positions of the
// iteration boundaries.
//
// Note [Periodicity]
// Each allocation contributes h = hash(allocation key, live bytes on its device before it). A period P
// holds at position i when h[i] == h[i - P]. Repeated layers inside one forward pass repeat their
// allocation keys but not their live bytes (activations pile up), and an iteration returns memory to
// where it started, so the live-bytes term separates "the same layer again" from "the same iteration
// again". A candidate P is taken from the previous occurrence of the current value and kept while it
// holds; it is accepted when it has held for at least two full periods and for at least half of
// everything seen so far (a short repeating stretch early on is not a training loop), and P is at
// least min_period allocations. The boundary is put at the allocation with the least live memory
// within one period: between the optimizer step and the next forward pass.
// This is a fallback: explicit or optimizer marks are always preferred. A long repetitive setup loop
// can still be mistaken for the training loop; such programs should call tierpack.step().
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace tierpack {

class PeriodDetector {
 public:
  struct Options {
    std::uint32_t min_period = 8;          ///< allocations
    std::size_t max_history = 1u << 22;    ///< give up after this many allocations
  };

  PeriodDetector() : PeriodDetector(Options{}) {}
  explicit PeriodDetector(Options options);

  /// Feeds allocation number position() with its key and the live bytes on its device before it.
  /// Returns true exactly once: when the period has been found.
  bool feed(std::uint64_t key, std::uint64_t live_before);

  bool found() const { return period_ > 0 && found_; }
  bool gave_up() const { return gave_up_; }
  /// Allocations per iteration.
  std::uint64_t period() const { return period_; }
  /// Position of the first boundary: iterations start at boundary() + k * period().
  std::uint64_t boundary() const { return boundary_; }
  /// Allocations fed so far.
  std::uint64_t position() const { return values_.size(); }

 private:
  std::uint64_t backward_run(std::uint64_t i, std::uint64_t p, std::uint64_t limit) const;

  Options options_;
  std::vector<std::uint64_t> values_;
  std::vector<std::uint64_t> live_;
  std::unordered_map<std::uint64_t, std::uint64_t> last_;  ///< value -> last position
  std::uint64_t candidate_ = 0;
  std::uint64_t run_ = 0;  ///< consecutive positions ending at the newest one where candidate_ held
  std::uint64_t period_ = 0;
  std::uint64_t boundary_ = 0;
  bool found_ = false;
  bool gave_up_ = false;
};

}  // namespace tierpack
