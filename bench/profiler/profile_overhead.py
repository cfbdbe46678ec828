#!/usr/bin/env python3
"""Cost of profiling on the embedded examples: the profiled iteration and the steady state after it,
relative to a normal iteration of the same program run without tierpack.

    python3 bench/profiler/profile_overhead.py --build build-torch [--iters 16] [--reps 3]

For each example (examples/train_cpu.py under /usr/bin/python3, examples/train_cpu.cpp through
LD_PRELOAD) and each mode (baseline: no tierpack; observer: --page-tracer off; uffd; mprotect) it runs
the program, reads its own per-iteration times and, from the profile, which iteration was profiled.
Times are the training thread's CPU time ("cputimes": robust on a shared machine; includes kernel time
of page faults and tracer syscalls, excludes the background profile writer) unless --wall is given
("timings"). Reported, as medians over --reps runs:
  normal    the same iteration (by index) of the baseline run: early iterations are slower anyway
            (lazy initialisation), so the profiled iteration k is compared with iteration k
  profiled  the profiled iteration; x normal = profiled / normal   (targets: observer <= 1.5x, tracer <= 10x)
  steady    median of the iterations after the profile was written (skipping the one that writes it),
            against the same iterations of the baseline             (target: ~1.0x)
Timings on a shared 2-core machine are noisy: compare columns of one run, not runs of different days.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("command failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout, p.stderr))
    return p.stdout + p.stderr


def timings(output, key):
    for line in output.splitlines():
        if line.startswith(key + " "):
            return [float(x) for x in line.split()[1:]]
    sys.exit("no %s line in:\n%s" % (key, output))


def profiled_iteration(path):
    with open(path, "rb") as f:
        payload = f.read().split(b"\n", 1)[1]
    meta = json.loads(payload)["meta"]
    return meta["profiled_iteration"], meta["page_tracer"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build-torch", help="build directory with -DTIERPACK_WITH_TORCH=ON")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--iters", type=int, default=16)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--wall", action="store_true", help="wall-clock times instead of thread CPU time")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tierpack = os.path.join(args.build, "bin", "tierpack")
    examples = {
        "train_cpu.py": [args.python, os.path.join(root, "examples", "train_cpu.py"), "--iters", str(args.iters),
                         "--timings"],
        "train_cpu (C++)": [os.path.join(args.build, "bin", "train_cpu"), str(args.iters), "-", "--timings"],
    }
    modes = [("observer only", "off"), ("uffd-wp tracer", "uffd"), ("mprotect tracer", "mprotect")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.tpk")
        for name, cmd in examples.items():
            bases = []
            traced = {m: [] for m, _ in modes}
            key = "timings" if args.wall else "cputimes"
            for _ in range(args.reps):
                bases.append(timings(run(cmd), key))
                for mode, tracer in modes:
                    t = timings(run([tierpack, "profile", "--quiet", "-o", out, "--page-tracer", tracer, "--"] + cmd), key)
                    k, _ = profiled_iteration(out)
                    traced[mode].append((k, t))
            med = lambda xs: statistics.median(xs)  # noqa: E731
            for mode, _ in modes:
                ks = [k for k, _ in traced[mode]]
                k = max(set(ks), key=ks.count)  # the profiled iteration (the same in every run)
                normal = med([b[k] for b in bases])
                prof = med([t[k] for kk, t in traced[mode] if kk == k])
                base_steady = med([med(b[k + 2:]) for b in bases])
                steady = med([med(t[k + 2:]) for kk, t in traced[mode] if kk == k])
                rows.append((name, "%s (iteration %d)" % (mode, k), normal, prof, steady / base_steady * normal))
    print("times: %s, median of %d run(s), %d iterations each" % ("wall clock" if args.wall else "training thread CPU",
                                                                 args.reps, args.iters))
    print("| example | mode | same iteration without tierpack (ms) | profiled iteration (ms) | x | steady state x |")
    print("|---|---|---:|---:|---:|---:|")
    for name, mode, n, prof, steady in rows:
        print("| %s | %s | %.1f | %.1f | %.2fx | %.2fx |" % (name, mode, n, prof, prof / n, steady / n))


if __name__ == "__main__":
    main()
