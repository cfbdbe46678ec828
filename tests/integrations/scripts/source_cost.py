"""What recording the Python source line costs per allocation (Note [Python source] in
integrations/torch/python_source.cpp).

    PYTHONPATH=python /usr/bin/python3 tests/integrations/scripts/source_cost.py [N]

profiles this script six times under `tierpack profile` (--python-source off and on, alternated)
and prints, per allocation (the least of the three runs of each), the time of a small CPU tensor allocation while the profiled iteration is
recorded and after it (the steady state, where nothing asks for sources), for two call shapes:
torch.empty called from this file (innermost frame is the user's) and torch.nn.functional.relu (one
frame of torch's own skipped). It also prints the --verbose line that says how many walks found the
GIL already held. A C++ benchmark cannot measure this: the cost is CPython's (GIL, frame objects).
"""
import os
import re
import subprocess
import sys
import tempfile
import time

if len(sys.argv) > 1 and sys.argv[1] == "--child":
    import torch
    import torch.nn.functional as F

    import tierpack

    n = int(sys.argv[2])
    torch.set_num_threads(1)
    x = torch.ones(16)

    def empties(count):
        t0 = time.perf_counter_ns()
        for _ in range(count):
            torch.empty(16)
        return (time.perf_counter_ns() - t0) / count

    def relus(count):
        t0 = time.perf_counter_ns()
        for _ in range(count):
            F.relu(x)
        return (time.perf_counter_ns() - t0) / count

    def best(rounds, count):
        """The least time per allocation over `rounds` chunks of `count` (other load only adds time)."""
        e, r = [], []
        for _ in range(rounds):
            e.append(empties(count))
            r.append(relus(count))
        return min(e), min(r)

    empties(1000), relus(1000)
    tierpack.step()  # end of the warm-up iteration
    rec = best(5, n // 5)
    tierpack.step()  # end of the profiled iteration
    time.sleep(1.0)  # the profile is written on a background thread (Note [Profile write]): let it finish
    after = best(5, n // 5)
    tierpack.step()
    print("RESULT %.1f %.1f %.1f %.1f" % (rec + after))
    sys.exit(0)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, os.pardir, "python"))
from tierpack import _libs  # noqa: E402

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
cli = _libs.cli_path()
if not cli:
    sys.exit("no tierpack executable found (build it first)")
rows = {}
with tempfile.TemporaryDirectory() as tmp:
    for setting in ("off", "on") * 3:  # alternated, the least of three (the machine may be busy)
        out = subprocess.run([cli, "profile", "--verbose", "--page-tracer", "off", "--python-source", setting,
                              "-o", os.path.join(tmp, setting + ".tpk"),
                              "--", sys.executable, os.path.abspath(__file__), "--child", str(n)],
                             capture_output=True, text=True)
        text = out.stdout + out.stderr
        m = re.search(r"RESULT (\S+) (\S+) (\S+) (\S+)", text)
        if out.returncode != 0 or not m:
            sys.exit("profile failed (%s):\n%s" % (setting, text))
        values = [float(v) for v in m.groups()]
        rows[setting] = [min(a, b) for a, b in zip(rows[setting], values)] if setting in rows else values
        walks = re.search(r"python sources: .*", text)
        print("sources %-3s: %s" % (setting, walks.group(0) if walks else "(no source line)"))
print("ns per allocation (N=%d)      recording: empty   relu | after it: empty   relu" % n)
for setting in ("off", "on"):
    r = rows[setting]
    print("  sources %-3s                       %7.0f %6.0f |          %7.0f %6.0f" % (setting, *r))
d = [rows["on"][i] - rows["off"][i] for i in range(4)]
print("  cost of the source line            %7.0f %6.0f |          %7.0f %6.0f" % tuple(d))
