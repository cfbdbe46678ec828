// The GPU tier's statistics file, `<stats>.gpu<N>.json` beside a run's `--stats` (written by the storage
// mover, python/tierpack/mover_stats.py, and by the vmm runtime, Note [GPU statistics file] in
// runtime/gpu/gpu_runtime.cpp): where they are and the one line that says what a GPU tier did,
// which `tierpack run` prints and `tierpack report` shows.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tierpack {

/// The GPU tiers' statistics files beside `stats_path`, with their device numbers.
std::vector<std::pair<int, std::string>> gpu_stats_files(const std::string& stats_path);

/// "GPU tier gpu0: phase planned, budget 15.51 GiB, 552 saved storage(s) move in the plan; iteration 12:
/// 16.33 GiB to host, 16.33 GiB back, 0 stall(s), 97 storage(s) made again (674.16 MiB), making storages
/// again took 18.8 ms of GPU time in iteration 5 (predicted 3.2 ms), PyTorch's allocator held 14.38 GiB
/// (9.43 GiB live)": the last iteration of one file, and the measured recomputation where the file has it.
/// Missing fields read as 0.
std::string gpu_stats_line(const nlohmann::json& stats);

}  // namespace tierpack
