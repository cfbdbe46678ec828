#!/bin/bash
# Session 25, device call 6: the storage mover's CUDA test, all cases, after its reserved-memory check learnt the
# words the mover uses ("over a 0.91 GiB budget": call 5's 70% case failed on the wording alone).
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so
timeout 230 python3 tests/integrations/python/storage_mover_cuda_test.py -v 2>&1 | tail -12 | tee $OUT/call6_cuda_test.txt
