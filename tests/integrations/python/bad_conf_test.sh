#!/bin/sh
# A bad TIERPACK_CONF stops the program before the user's script runs (exit 2, one line saying why), so a
# typo in a budget never trains untiered. Usage: bad_conf_test.sh SOURCE_DIR LIBTIERPACK_TORCH
src=$1 lib=$2
out=$(GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536 PYTHONPATH="$src/python/sitecustomize:$src/python" TIERPACK_LIB="$lib" TIERPACK_CONF=mode:run,fast_budget:5x \
      /usr/bin/python3 -c 'import torch; print("trained untiered")' 2>&1)
rc=$?
echo "$out"
echo "exit status $rc"
[ "$rc" -eq 2 ] || { echo "FAIL: expected exit status 2"; exit 1; }
echo "$out" | grep -q "trained untiered" && { echo "FAIL: the script ran"; exit 1; }
echo "$out" | grep -q "bad configuration, the program does not start: .*TIERPACK_CONF" || { echo "FAIL: no one-line reason"; exit 1; }
exit 0
