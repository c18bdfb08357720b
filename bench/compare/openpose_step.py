#!/usr/bin/env python3
"""Side by side: tcv vs PyTorch 1.13 training OpenPose (VGG-19, an initial and five
refinement stages) on the CPU.

`tcv-bench train --model openpose` against bench/compare/openpose_step_torch.py (a
PyTorch module built to models/pose/openpose.h's spec, the same parameter count):
batch 2 of 3x368x368 (TorchCV's input size), TorchCV's staged masked L2 loss on random
heatmap and PAF targets with a mask at stride 8, SGD momentum 0.9, 2 threads each,
PyTorch with its fastest malloc settings. Runs are interleaved (tcv, torch, tcv, ...),
each a fresh process (so peak RSS is that of one run), and the medians of images/s and
peak RSS are printed with their ratios.

    /usr/bin/python3 bench/compare/openpose_step.py [--build build] [--rounds 3]
        [--models openpose,openpose_lite] [--conv-algo auto|direct] [--omp-wait-policy passive]

--omp-wait-policy sets OMP_WAIT_POLICY for both (both run their kernels on OpenMP): on a
machine whose cores other jobs share, threads that spin at every barrier while the other
thread waits for a core slow both down (OpenPose's tcv step took 17-20 s spinning and
11-12 s passive at a load of 6-7 on 2 cores).
"""
import argparse
import json
import os
import statistics
import sys

from common import tcv_train_step, torch_train_step


def shape_args(args):
    return ["--batch", str(args.batch), "--image-size", str(args.image_size), "--steps",
            str(args.steps), "--warmup", str(args.warmup)]


def base_env(args):
    env = dict(os.environ)
    if args.omp_wait_policy:
        env["OMP_WAIT_POLICY"] = args.omp_wait_policy
    return env


def run_tcv(args, model):
    return tcv_train_step(args.build, model, args.threads,
                          [*shape_args(args), "--conv-algo", args.conv_algo], base_env(args))


def run_torch(args, model):
    return torch_train_step("openpose_step_torch.py", args.threads,
                            ["--model", model, *shape_args(args)], base_env(args))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--models", default="openpose")
    p.add_argument("--conv-algo", default="auto", choices=["auto", "direct", "winograd"])
    p.add_argument("--omp-wait-policy", choices=["active", "passive"],
                   help="OMP_WAIT_POLICY for both (default: unset, OpenMP's own)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--image-size", type=int, default=368)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    args = p.parse_args()
    models = args.models.split(",")
    runs = {m: {"tcv": [], "pytorch": []} for m in models}
    loads = []
    for r in range(args.rounds):
        for m in models:
            runs[m]["tcv"].append(run_tcv(args, m))
            runs[m]["pytorch"].append(run_torch(args, m))
            t, q = runs[m]["tcv"][-1], runs[m]["pytorch"][-1]
            if t["parameters"] != q["parameters"]:
                sys.exit(f"{m}: tcv has {t['parameters']} parameters, the PyTorch module "
                         f"{q['parameters']}: not the same network")
            loads.append(os.getloadavg()[0])
            print(f"round {r + 1} {m}: tcv {t['images_per_sec']:.3f} img/s "
                  f"{t['peak_rss_bytes'] / 2**20:.0f} MiB, pytorch {q['images_per_sec']:.3f} img/s "
                  f"{q['peak_rss_bytes'] / 2**20:.0f} MiB, load {loads[-1]:.2f}", file=sys.stderr,
                  flush=True)

    def med(rs, key):
        return statistics.median(x[key] for x in rs)

    print(f"OpenPose train step, batch {args.batch} of 3x{args.image_size}x{args.image_size}, "
          f"staged masked L2, {args.threads} threads, tcv conv {args.conv_algo}, median of "
          f"{args.rounds} interleaved rounds ({args.steps} timed steps after {args.warmup} "
          f"warm-up each), OMP_WAIT_POLICY {args.omp_wait_policy or 'unset'}, 1-min load "
          f"{statistics.median(loads):.2f} (median)")
    print(f"  {'model':14s} {'':8s} {'images/s':>9s} {'ms/step':>9s} {'peak RSS MiB':>13s} "
          f"{'params':>10s}")
    summary = []
    for m in models:
        for name in ("tcv", "pytorch"):
            rs = runs[m][name]
            print(f"  {m:14s} {name:8s} {med(rs, 'images_per_sec'):9.3f} "
                  f"{med(rs, 'ms_per_step'):9.0f} {med(rs, 'peak_rss_bytes') / 2**20:13.0f} "
                  f"{rs[0]['parameters']:10d}")
        it, ip = med(runs[m]["tcv"], "images_per_sec"), med(runs[m]["pytorch"], "images_per_sec")
        rt = med(runs[m]["tcv"], "peak_rss_bytes") / 2**20
        rp = med(runs[m]["pytorch"], "peak_rss_bytes") / 2**20
        print(f"  {m:14s} {'ratio':8s} {it / ip:8.2f}x {'':9s} {rt / rp:12.2f}x")
        summary.append({"model": m, "parameters": runs[m]["tcv"][0]["parameters"],
                        "tcv_images_per_sec": it, "torch_images_per_sec": ip,
                        "speed_ratio": it / ip, "tcv_peak_rss_mib": rt, "torch_peak_rss_mib": rp})
    print(json.dumps({"batch": args.batch, "image_size": args.image_size, "threads": args.threads,
                      "rounds": args.rounds, "conv_algo": args.conv_algo,
                      "omp_wait_policy": args.omp_wait_policy,
                      "load_median": statistics.median(loads), "models": summary}))


if __name__ == "__main__":
    main()
