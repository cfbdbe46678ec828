#!/bin/bash
# Session 25, device call 3: a native backtrace of call 2's crash (`tierpack run -- python3 examples/train_cpu.py`
# aborts with "free(): invalid pointer" at the end of the profiled iteration; `tierpack profile` does not).
# RelWithDebInfo build; the child's environment as `tierpack run` gives it (/proc/self/environ, before the
# bootstrap edits os.environ), then the same command under cuda-gdb (no gdb on this machine).
set -o pipefail
export PYTHONUNBUFFERED=1
R=$PWD
( time CMAKE_ARGS=-DCMAKE_BUILD_TYPE=RelWithDebInfo timeout 300 scripts/gpu-machine-build.sh build --deps .devcarry/deps.tar.gz --build-dir /tmp/bg ) > /tmp/build.txt 2>&1 || tail -30 /tmp/build.txt
{
for l in /tmp/bg/install/lib/libtierpack_torch.so /tmp/bg/install/lib/libtierpack_cuda.so; do echo "== NEEDED of $l"; readelf -d $l | grep NEEDED; done
echo "== python: $(readlink -f $(command -v python3))"; readelf -d $(readlink -f $(command -v python3)) | grep NEEDED
cd /tmp
tierpack run -- python3 -c 'import sys; sys.stdout.write(open("/proc/self/environ").read())' > /tmp/env0 2>/tmp/env0.err
tr '\0' '\n' < /tmp/env0 | grep -E "^(TIERPACK|PYTHONPATH|GLIBC|LD_)" | tee /tmp/env.txt
mapfile -t E < <(tr '\0' '\n' < /tmp/env0 | grep -E "^(TIERPACK|PYTHONPATH|GLIBC|LD_)")
echo "== cuda-gdb: env <those> python3 examples/train_cpu.py"
timeout 300 env "${E[@]}" cuda-gdb -q -batch -ex "set pagination off" -ex "set print thread-events off" -ex run -ex "bt 30" -ex "info sharedlibrary jemalloc" \
  --args python3 $R/examples/train_cpu.py > /tmp/gdb.txt 2>&1
echo "exit status $?"; grep -v "^\[New Thread\|^\[Thread\|^iter " /tmp/gdb.txt | tail -60
} > $OUT/backtrace.txt 2>&1
cp /tmp/gdb.txt $OUT/gdb_full.txt; cp /tmp/build.txt $OUT/build3.txt
tail -75 $OUT/backtrace.txt
