#!/bin/bash
# Session 37, device call 4 (commit COMMIT4: the merge of issue 24's leftovers — GroupMover's evict and prefetch
# through one queue_job, the host run statistics from the schedule executor's log, one ScanningTracer): the three
# GPU test suites, and the storage mover's raw copies test.
set -o pipefail
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
D=bench/results/gpu-h200-2026-12-11-1
N=4
O=/tmp/call$N; rm -rf $O; mkdir -p $O
{ echo "commit $(cat $D/COMMIT$N)"; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader; python3 -c 'import torch;print("torch",torch.__version__)'; } > $O/env$N.txt
for t in gpu_alloc_tests gpu_migrate_tests gpu_runtime_tests; do
  { echo "== $t"; timeout 100 .devcarry/tests/$t 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|FAILED|Failure" | tail -14; echo "rc=${PIPESTATUS[0]}"; } > $O/call${N}_$t.txt
  cat $O/call${N}_$t.txt
done
{ timeout 60 python3 tests/integrations/python/raw_copies_test.py -v 2>&1; echo "rc=$?"; } > $O/call${N}_raw_copies.txt
grep -E "^Ran|^OK|FAILED|rc=" $O/call${N}_raw_copies.txt
tar czf $OUT/call${N}.tgz -C /tmp call$N
