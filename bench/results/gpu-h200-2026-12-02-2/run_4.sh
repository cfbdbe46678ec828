#!/bin/bash
# Session 26, device call 4 (commit COMMIT3): the storage mover's CUDA test, all cases, with module recompute.
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
{ echo "commit $(cat bench/results/gpu-h200-2026-12-02-2/COMMIT3)"; timeout 170 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1; echo "rc=$?"; } > $OUT/call4_cuda_test.txt
