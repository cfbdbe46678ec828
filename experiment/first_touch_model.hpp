// First-touch placement at page granularity, for the calibrated model. Linux's default policy puts a
// page on the node of the CPU that first touches it, falling back to the next node when that one is
// full; an allocator (glibc, PyTorch's caching allocator) then reuses freed addresses, so a later
// tensor at the same address inherits the page's node. Modelled here on the profile's addresses:
// pages are placed in the order the iteration first touches them (tensors alive at its start first,
// in address order), on the fast tier while fewer than budget/page pages are there, else on the slow
// tier; nothing ever moves and freed pages keep their node. The placer's "first-touch" baseline is
// the per-tensor variant in which freed fast memory is returned (what `preferred-fast` reports).
#pragma once

#include "core/profile.hpp"
#include "placer/baselines.hpp"
#include "placer/replay.hpp"

namespace tierpack::experiment {

placer::ReplayResult replay_first_touch_pages(const Profile& profile, const placer::BaselineSetup& setup);

}  // namespace tierpack::experiment
