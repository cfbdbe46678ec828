#!/usr/bin/env python3
"""Step time of the embedded CPU example under `tierpack run` against the same program without
tierpack, in the steady state (iterations after the plan was installed).

    python3 bench/migrate/run_overhead.py --build build [--iters 16] [--reps 3] [--wall]

Modes (examples/train_cpu.py under /usr/bin/python3):
  plain       no tierpack
  run-1tier   tierpack run, this machine's tiers, no budget: routed by the plan, nothing moves
  run-cxl50   tierpack run --tiers preset:ddr5-cxl --fast-budget 50%: on a one-node machine the CXL
              tier is emulated on node 0, so this is the cost of routing + issuing moves (move_pages to
              the node the pages are on) + op events, not of slower memory
For each mode, the median over --reps runs of the median of iterations >= 3 (the plan applies from
iteration 2; iteration 2 pays for the first faults of the new arenas). Times are the training thread's
CPU time ("cputimes") unless --wall ("timings"). Noisy on a shared 2-core machine: compare the columns
of one invocation.
"""
import argparse
import os
import statistics
import subprocess
import sys


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("command failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout, p.stderr))
    return p.stdout


def times(output, key):
    for line in output.splitlines():
        if line.startswith(key + " "):
            return [float(x) for x in line.split()[1:]]
    sys.exit("no %s line in:\n%s" % (key, output))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--iters", type=int, default=16)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--wall", action="store_true")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tp = os.path.join(args.build, "bin", "tierpack")
    prog = [args.python, os.path.join(root, "examples", "train_cpu.py"), "--iters", str(args.iters), "--timings"]
    modes = {
        "plain": prog,
        "run-1tier": [tp, "run", "--quiet", "--"] + prog,
        "run-cxl50": [tp, "run", "--quiet", "--tiers", "preset:ddr5-cxl", "--fast-budget", "50%", "--"] + prog,
    }
    key = "timings" if args.wall else "cputimes"
    results = {m: [] for m in modes}
    losses = {}
    for _ in range(args.reps):
        for m, cmd in modes.items():  # interleaved, so drifts of a shared machine hit every mode alike
            out = run(cmd)
            t = times(out, key)[3:]
            results[m].append(statistics.median(t))
            losses.setdefault(m, [l for l in out.splitlines() if l.startswith("iter ")])
    base = statistics.median(results["plain"])
    print("steady-state step (%s, median of iterations 3..%d, median of %d runs)" % (
        "wall" if args.wall else "training-thread CPU time", args.iters - 1, args.reps))
    print("%-10s %10s %8s  %s" % ("mode", "step ms", "x plain", "losses == plain"))
    for m in modes:
        v = statistics.median(results[m])
        print("%-10s %10.2f %8.3f  %s" % (m, v, v / base, losses[m] == losses["plain"]))


if __name__ == "__main__":
    main()
