// ProcessRank: which rank of a distributed job this process is, as torchrun / torch.distributed
// launchers announce it in the environment (RANK, WORLD_SIZE, LOCAL_RANK), and the per-rank path
// patterns (`-o out.%r.tpk`) that give every rank its own profile, plan and stats files.
//
// Note [Per-rank files]
// Under `torchrun --nproc-per-node N`, every rank is a process of its own running the same command
// with the same TIERPACK_CONF. Paths in it may hold `%r`, replaced in each process by its rank (0
// when the process is not part of a distributed job), so N processes never write one file. `%%` is a
// literal `%`; any other `%` is left as it is (paths may contain one).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tierpack {

struct ProcessRank {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  ///< rank on this host: picks the GPU (and its NUMA node) of the rank
};

/// The rank the environment gives this process (RANK, WORLD_SIZE, LOCAL_RANK), nullopt when it gives
/// none. Throws logic_error for a value that is not a non-negative integer, or a rank outside the world.
std::optional<ProcessRank> process_rank_from_env();

/// `pattern` with `%r` replaced by `rank` and `%%` by `%` (Note [Per-rank files]).
std::string expand_rank_pattern(std::string_view pattern, int rank);

/// Whether `pattern` holds a `%r`.
bool has_rank_pattern(std::string_view pattern);

/// The file a GPU tier writes beside a run's file: `path` without its extension + ".gpu<device>" +
/// `suffix` ("out/run.tpk", 0, ".tpk" -> "out/run.gpu0.tpk"). `device` < 0 leaves "%d" for the
/// runtime to fill in.
std::string device_sibling_path(std::string_view path, int device, std::string_view suffix);

}  // namespace tierpack
