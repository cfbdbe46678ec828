#!/bin/sh
# Stands in for a training script whose GPU tier ran but whose host side did not (what happened on the
# H200 with a libtierpack_torch.so built for another torch): it writes the GPU tier's statistics file
# where the runtime writes it (TIERPACK_CONF stats_out without its extension + .gpu0.json, Note [GPU
# statistics file] in runtime/gpu/gpu_runtime.cpp), in the runtime's format. This machine has
# no GPU, so the CLI's side of that contract is what `cli.run_gpu_tier_only` checks.
set -e
stats=$(printf '%s\n' "$TIERPACK_CONF" | tr ',' '\n' | sed -n 's/^stats_out://p')
[ -n "$stats" ] || { echo "fake_gpu_tier: no stats_out in TIERPACK_CONF" >&2; exit 3; }
stats=$(printf '%s' "$stats" | sed 's/%r/0/g')
gpu="${stats%.*}.gpu0.json"
if [ "$1" = storage ]; then
  # The storage mover's file (python/tierpack/mover_stats.py): $2 is what PyTorch's allocator held at most
  # in the last iteration (Note [Reserved memory]), under a 1 GiB budget.
  cat > "$gpu" <<JSON
{"device": 0, "mechanism": "storage", "phase": "planned", "budget": 1073741824,
 "plan": {"moves": 3, "fits": true},
 "iterations": [{"iteration": 7, "mode": "planned", "bytes_to_host": 1048576, "bytes_to_device": 1048576,
                 "stalls": 0, "divergences": 0, "peak_live": 805306368, "peak_reserved": $2,
                 "recomputed": 2, "bytes_recomputed": 2097152, "host_ms": 1.5}],
 "recomputations": {"iteration": 5, "predicted_ms": 0.5, "measured_ms": 1.25, "storages": [[0, 0.25, 0.5], [2, 0.25, 0.75]]},
 "over_planned": [[393, "unpack", 37, 858993459]]}
JSON
else
cat > "$gpu" <<JSON
{"device": 0, "phase": "planned", "budget": 1073741824, "divergence": "",
 "plan": {"groups": 3, "moves": 6},
 "verify": {"mode": "sampled", "rewrites": 2, "repairs": 1},
 "iterations": [{"iteration": 5, "phase": "planned", "bytes_to_host": 1048576, "bytes_to_device": 1048576, "stalls": 1}]}
JSON
fi
# Its run statistics for the report (Note [GPU run statistics]) and, with profile_out, its profile's
# file (the CLI only checks that it exists).
cat > "${stats%.*}.gpu0.run.json" <<JSON
{"format": "tierpack-run-stats", "version": 1, "source": "fake", "iterations": []}
JSON
profile=$(printf '%s\n' "$TIERPACK_CONF" | tr ',' '\n' | sed -n 's/^profile_out://p' | sed 's/%r/0/g')
[ -z "$profile" ] || : > "${profile%.*}.gpu0.tpk"
