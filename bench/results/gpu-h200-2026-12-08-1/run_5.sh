#!/bin/bash
# Session 34, device call 5 (commit COMMIT5, the runtime of calls 1-4; one command line on the machine still warm):
# Hugging Face GPT-2 large at 75% of the default peak with the default options, call 2's row repeated. In call5.tgz.
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so; mkdir -p /tmp/call5; timeout 110 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 90 --commit 1bfa231 --logs /tmp/logs5 --models hf-gpt2 --modes default,tierpack --budgets 75 --json /tmp/call5/call5_hf-gpt2.json > /tmp/call5/call5_hf-gpt2.txt 2>&1; echo rc=$? >> /tmp/call5/call5_hf-gpt2.txt; grep "^| [dt]\|^- \|rc=" /tmp/call5/call5_hf-gpt2.txt; tar czf $OUT/call5.tgz -C /tmp call5 logs5
