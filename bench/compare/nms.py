#!/usr/bin/env python3
"""Side by side: tcv's CPU NMS vs torchvision 0.14's (torchvision.ops.nms) on
the same 10,000 boxes (and 1,000), IoU threshold 0.5.

The boxes are closed-form (bench/bench_boxes.cpp's make_boxes): "spread" over a
1000x1000 image, sides 10 to 100 (most kept), and "clustered" around 50 centres,
sides 40 to 80 (most suppressed). Runs are interleaved (tcv, torchvision, ...),
each a fresh process; prints the median time of each and the ratio, and checks
that both keep the same number of boxes.

    /usr/bin/python3 bench/compare/nms.py [--build build] [--rounds 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from golden_common import uniform  # noqa: E402

CASES = [(1000, 0), (10000, 0), (10000, 1)]


def boxes(n, layout):
    v = uniform(5 * n, 77).reshape(n, 5)
    if layout == 0:
        x1, y1 = 1000.0 * v[:, 0], 1000.0 * v[:, 1]
        w, h = 10.0 + 90.0 * v[:, 2], 10.0 + 90.0 * v[:, 3]
    else:
        c = np.floor(50.0 * v[:, 0])
        x1 = 20.0 * np.fmod(c, 7.0) * 7.0 + 30.0 * v[:, 1]
        y1 = 20.0 * np.floor(c / 7.0) * 7.0 + 30.0 * v[:, 2]
        w, h = 40.0 + 40.0 * v[:, 3], 40.0 + 40.0 * v[:, 4]
    b = np.stack([x1, y1, x1 + w, y1 + h], 1).astype(np.float32)
    s = uniform(n, 78).astype(np.float32)
    return b, s


TORCH_SNIPPET = r"""
import json, statistics, sys, time
import numpy as np, torch, torchvision
sys.path.insert(0, {here!r})
from nms import boxes, CASES
torch.set_num_threads(1)
out = {{}}
for n, layout in CASES:
    b, s = boxes(n, layout)
    bt, st = torch.from_numpy(b), torch.from_numpy(s)
    keep = torchvision.ops.nms(bt, st, 0.5)
    reps = 3 if n >= 10000 else 20
    ms = []
    for _ in range(reps):
        t0 = time.perf_counter()
        keep = torchvision.ops.nms(bt, st, 0.5)
        ms.append(1000.0 * (time.perf_counter() - t0))
    out[f"{{n}}/{{layout}}"] = {{"ms": statistics.median(ms), "kept": int(keep.numel())}}
print(json.dumps(out))
"""


def run_torch():
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run(["/usr/bin/python3", "-c", TORCH_SNIPPET.format(here=here)], check=True,
                       capture_output=True, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_tcv(build):
    r = subprocess.run([os.path.join(build, "bench", "tcv-gbench"), "--benchmark_filter=BM_Nms",
                        "--benchmark_format=json", "--benchmark_min_time=0.5"],
                       env=dict(os.environ, OMP_NUM_THREADS="1"), check=True, capture_output=True,
                       text=True)
    out = {}
    for b in json.loads(r.stdout)["benchmarks"]:
        n, layout = b["name"].split("/")[1:3]
        out[f"{n}/{layout}"] = {"ms": b["real_time"], "kept": int(b["kept"])}
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    tcv, tv = [], []
    for r in range(args.rounds):
        tcv.append(run_tcv(args.build))
        tv.append(run_torch())
        print(f"round {r + 1}: " + ", ".join(
            f"{k}: tcv {tcv[-1][k]['ms']:.2f} ms, torchvision {tv[-1][k]['ms']:.2f} ms"
            for k in tcv[-1]), file=sys.stderr)
    print(f"NMS on the CPU (1 thread, IoU 0.5), median of {args.rounds} interleaved rounds")
    print(f"  {'boxes':>6s} {'layout':>10s} {'kept':>6s} {'tcv ms':>9s} {'torchvision ms':>15s} "
          f"{'speed-up':>9s}")
    rows = []
    for n, layout in CASES:
        k = f"{n}/{layout}"
        a = statistics.median(r[k]["ms"] for r in tcv)
        b = statistics.median(r[k]["ms"] for r in tv)
        kept_t, kept_v = tcv[0][k]["kept"], tv[0][k]["kept"]
        assert kept_t == kept_v, f"{k}: tcv kept {kept_t}, torchvision {kept_v}"
        name = "spread" if layout == 0 else "clustered"
        print(f"  {n:6d} {name:>10s} {kept_t:6d} {a:9.3f} {b:15.3f} {b / a:8.1f}x")
        rows.append({"boxes": n, "layout": name, "kept": kept_t, "tcv_ms": a,
                     "torchvision_ms": b, "speedup": b / a})
    print(json.dumps({"rounds": args.rounds, "cases": rows}))


if __name__ == "__main__":
    main()
