#!/bin/bash
# Session 24, device call 5 (the last 2 minutes of device time, on call 4's machine and code, commit in COMMIT4):
# the CUDA test's two budget cases with the soft limit. The test installs tierpack with gpu="mechanism:storage";
# for this call that line was edited in the working tree (not committed) to add limit:soft:
#   sed -i 's/gpu="mechanism:storage"/gpu="mechanism:storage,limit:soft"/' tests/integrations/python/storage_mover_cuda_test.py
# (the default became soft again afterwards, so the committed test runs the same configuration).
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
timeout 95 python3 tests/integrations/python/storage_mover_cuda_test.py -v -k 70_percent -k 50_percent 2>&1 | tail -15 | tee $OUT/call5_cuda_test_soft.txt
