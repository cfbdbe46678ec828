#!/usr/bin/env bash
# Issue 26's done-when: "a new user's first `tierpack run` on a one-node machine either works or fails
# before launching with the command that would work". On a one-node machine (an hwloc XML, so the test
# does not depend on this machine's nodes) `tierpack run --fast-budget 10%` must print exactly one line
# on stderr, exit 2 (a usage error), name the command that works, and not start the training; the
# command it names must then run the training to its end with the plan applied.
#   budget_too_small_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tp=$build/bin/tierpack
py=/usr/bin/python3
ex=$src/examples/train_cpu.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export HWLOC_XMLFILE=$src/tests/data/topology/one_node.xml

set +e
"$tp" run --fast-budget 10% -- $py "$ex" --iters 3 >"$work/out.txt" 2>"$work/err.txt"
status=$?
set -e
cat "$work/err.txt"
[ "$status" = 2 ] || fail "exit status $status, not 2"
[ "$(wc -l <"$work/err.txt" | tr -d ' ')" = 1 ] || fail "not exactly one line on stderr"
grep -q '^tierpack run: --fast-budget 10%: this machine has one host memory tier' "$work/err.txt" || fail "the line does not say why"
! grep -q '^iter ' "$work/out.txt" || fail "the training started although the run could only fail"
suggested=$(sed -n 's/.*(real budget and moves, no slower memory): tierpack run /run /p' "$work/err.txt")
[ -n "$suggested" ] || fail "no command that would work"
echo "suggested: tierpack $suggested"
# shellcheck disable=SC2086  # the suggested command is split as the user's shell would
eval "\"\$tp\" $suggested" >"$work/out2.txt" 2>"$work/err2.txt" || { cat "$work/err2.txt"; fail "the suggested command failed"; }
cat "$work/err2.txt"
[ "$(grep -c '^iter ' "$work/out2.txt")" = 3 ] || fail "the suggested command did not train to the end"
grep -Eq '^tierpack run: (rank 0: )?plan applied from iteration 2 for 1 of 1 iteration' "$work/err2.txt" ||
  fail "the suggested command did not apply the plan"
echo PASS
