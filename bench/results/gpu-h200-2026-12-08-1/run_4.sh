#!/bin/bash
# Session 34, device call 4 (commit COMMIT4, the runtime of calls 1-3; run as one command line on the machine call 3
# left warm): the Llama-style decoder at 75% of the default peak with the default options, call 2's row repeated (how
# far one run's plan path moves the step). Its table, log and statistics are in call4.tgz.
export PYTHONUNBUFFERED=1 TIERPACK_CUDA_LIB=$PWD/.devcarry/lib/libtierpack_cuda.so; mkdir -p /tmp/call4; timeout 150 python3 bench/gpu/models_bench.py --lib $TIERPACK_CUDA_LIB --steps 4 --warmup 3 --tierpack-warmup 14 --child-timeout 110 --commit 1bfa231 --logs /tmp/logs4 --models llama --modes default,tierpack --budgets 75 --json /tmp/call4/call4_llama.json > /tmp/call4/call4_llama.txt 2>&1; echo rc=$? >> /tmp/call4/call4_llama.txt; grep "^| [dt]\|^- \|rc=" /tmp/call4/call4_llama.txt; grep -h "plan from\|allocator held\|host's time" /tmp/logs4/*tierpack*.log | cut -c1-200; tar czf $OUT/call4.tgz -C /tmp call4 logs4
