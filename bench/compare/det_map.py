#!/usr/bin/env python3
"""Side by side: detection mAP evaluation, tcv (tcv-map-bench) vs pycocotools.

Synthetic COCO-style ground truth and detections (scripts/det_map_synth.py; by
default 5,000 images of random size, ~10 boxes per image, 80 categories with
COCO's ids, ~2 detections per box plus false positives, crowd regions, tied
scores) are written once as a COCO instances file and a results file. Then, in
interleaved rounds, tcv-map-bench (at each --threads count) and pycocotools'
COCOeval.evaluate() + accumulate() time the same evaluation; reading the files
is outside both timings. Prints the median per side and the ratio, and checks
that the twelve COCO numbers agree. Wall-clock medians give the ratio; CPU
times are printed beside them, since a busy machine stretches wall time.

pycocotools comes from PyPI in a virtual environment made for this comparison
(scripts/pycocotools-venv.sh); run this script with that environment's python:

    $(bash scripts/pycocotools-venv.sh) bench/compare/det_map.py [--build build] [--rounds 5]
"""
import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import det_map_synth as S  # noqa: E402
from common import last_json  # noqa: E402

COCO_IDS = [i for i in range(1, 91) if i not in (12, 26, 29, 30, 45, 66, 68, 69, 71, 83)]


def run_tcv(args, gt, dets, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = [os.path.join(args.build, "bench", "tcv-map-bench"), "--gt", gt, "--dets", dets,
           "--repeat", str(args.repeat), "--json"]
    return last_json(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)


def run_pycocotools(gt_dict, res):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = gt_dict
        coco.createIndex()
        dt = coco.loadRes(res)
        E = COCOeval(coco, dt, "bbox")
        t0, c0 = time.perf_counter(), time.process_time()
        E.evaluate()
        E.accumulate()
        sec, cpu = time.perf_counter() - t0, time.process_time() - c0
        E.summarize()
    return sec * 1000, cpu * 1000, list(E.stats)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeat", type=int, default=3, help="tcv runs per round (its median counts)")
    p.add_argument("--images", type=int, default=5000)
    p.add_argument("--classes", type=int, default=80)
    p.add_argument("--boxes", type=int, default=20, help="ground-truth boxes per image: 0..N")
    p.add_argument("--threads", default="1,2", help="tcv's OMP_NUM_THREADS, comma-separated")
    args = p.parse_args()
    threads = [int(t) for t in args.threads.split(",")]

    images = S.make_set(7, args.images, args.classes + 1, crowded_every=0, max_gt=args.boxes)
    # make_set leaves its last class without ground truth: drop it, keep `classes` categories.
    for m in images:
        m["dets"] = [d for d in m["dets"] if d[4] <= args.classes]
    gt_dict, res = S.coco_dicts(images, args.classes, COCO_IDS[:args.classes])
    n_gt, n_det = len(gt_dict["annotations"]), len(res)
    root = tempfile.mkdtemp(prefix="tcv-det-map-")
    try:
        gt, dets = os.path.join(root, "gt.json"), os.path.join(root, "dets.json")
        with open(gt, "w") as f:
            json.dump(gt_dict, f)
        with open(dets, "w") as f:
            json.dump(res, f)
        tcv = {t: [] for t in threads}
        tcv_cpu = {t: [] for t in threads}
        ref, ref_cpu, stats_tcv, stats_ref = [], [], None, None
        for r in range(args.rounds):
            for t in threads:
                out = run_tcv(args, gt, dets, t)
                tcv[t].append(out["median_ms"])
                tcv_cpu[t].append(out["median_cpu_ms"])
                stats_tcv = out["metrics"]
            ms, cpu, stats_ref = run_pycocotools(gt_dict, res)
            ref.append(ms)
            ref_cpu.append(cpu)
            print(f"round {r + 1}: " + ", ".join(f"tcv {t} thr {tcv[t][-1]:.1f} ms" for t in threads) +
                  f", pycocotools {ms:.0f} ms", file=sys.stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    keys = ["map", "ap50", "ap75", "ap_small", "ap_medium", "ap_large", "ar1", "ar10", "ar100",
            "ar_small", "ar_medium", "ar_large"]
    diff = max(abs(stats_tcv[k] - v) for k, v in zip(keys, stats_ref))
    mp, mpc = statistics.median(ref), statistics.median(ref_cpu)
    print(f"COCO bbox evaluation (evaluate + accumulate), {args.images} images, {n_gt} boxes, "
          f"{n_det} detections, {args.classes} categories; median of {args.rounds} interleaved "
          f"rounds (tcv: median of {args.repeat} runs per round)")
    print(f"  {'':>16s} {'wall ms':>9s} {'ratio':>7s} {'CPU ms':>9s} {'ratio':>7s}")
    print(f"  {'pycocotools':>16s} {mp:9.1f} {1.0:6.1f}x {mpc:9.1f} {1.0:6.1f}x")
    summary = {"images": args.images, "boxes": n_gt, "detections": n_det,
               "pycocotools_ms": mp, "pycocotools_cpu_ms": mpc, "max_abs_diff": diff}
    for t in threads:
        mt, mtc = statistics.median(tcv[t]), statistics.median(tcv_cpu[t])
        name = f"tcv, {t} thread" + ("s" if t > 1 else "")
        print(f"  {name:>16s} {mt:9.1f} {mp / mt:6.1f}x {mtc:9.1f} {mpc / mtc:6.1f}x")
        summary[f"tcv_{t}t_ms"] = mt
        summary[f"ratio_{t}t"] = mp / mt
        summary[f"tcv_{t}t_cpu_ms"] = mtc
    print(f"  AP {stats_tcv['map']:.6f} (pycocotools {stats_ref[0]:.6f}); "
          f"max |difference| over the 12 numbers: {diff:.2e}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
