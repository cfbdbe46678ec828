#!/bin/bash
# session 15, device call 5 (nvidia-h200): torch.OutOfMemoryError through libtierpack_cuda_torch.so,
# built here against this machine's torch (integrations/torch/cuda_oom_shim.cpp), and the fallback
# without it (RuntimeError).
S=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$S/lib:$LD_LIBRARY_PATH PYTHONUNBUFFERED=1 PYTHONPATH=$S/python
{
echo "commit $(cat $S/COMMIT)"
T=$(python3 -c "import torch, os; print(os.path.dirname(torch.__file__))")
ABI=$(python3 -c "import torch; print(int(torch.compiled_with_cxx11_abi()))")
V=$(python3 -c "import torch; print(torch.__version__)")
echo "torch $V at $T, cxx11 abi $ABI"
echo "command: g++ -std=c++17 -O2 -shared -fPIC -D_GLIBCXX_USE_CXX11_ABI=$ABI -I\$T/include cuda_oom_shim.cpp -L\$T/lib -lc10 -ltierpack_cuda"
time g++ -std=c++17 -O2 -shared -fPIC -fvisibility=hidden -D_GLIBCXX_USE_CXX11_ABI=$ABI -I$T/include $S/src/cuda_oom_shim.cpp \
  -L$T/lib -lc10 -L$S/lib -ltierpack_cuda -Wl,-rpath,'$ORIGIN' -Wl,-rpath,$T/lib -Wl,--no-undefined -o $S/lib/libtierpack_cuda_torch.so
echo "$V" > $S/lib/libtierpack_cuda_torch.torch-version
echo "== with the shim"
TIERPACK_CUDA_LIB=$S/lib/libtierpack_cuda.so timeout 120 python3 $S/src/cuda_oom.py; echo "rc=$?"
echo "== without it"
TIERPACK_CUDA_LIB=$S/lib/libtierpack_cuda.so TIERPACK_CUDA_TORCH_LIB=/nonexistent/libtierpack_cuda_torch.so timeout 120 python3 $S/src/cuda_oom.py; echo "rc=$?"
} > $OUT/log5.txt 2>&1
cat $OUT/log5.txt | tail -c 6000
