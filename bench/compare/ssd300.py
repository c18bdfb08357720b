#!/usr/bin/env python3
"""Side by side: tcv vs torchvision 0.14 (PyTorch 1.13) training SSD300-VGG16 on the CPU.

`tcv-bench train --model ssd300` against bench/compare/ssd300_torch.py: batch 4
of 3x300x300, 21 classes, MultiBox loss on synthetic boxes, SGD, 2 threads each,
PyTorch with its fastest malloc settings. Runs are interleaved (tcv, torch,
tcv, ...), each a fresh process, and the medians of images/s and peak RSS are
printed with their ratios.

    /usr/bin/python3 bench/compare/ssd300.py [--build build] [--rounds 3]
"""
import argparse
import json
import statistics
import sys

from common import tcv_train_step, torch_train_step


def shape_args(args):
    return ["--batch", str(args.batch), "--image-size", str(args.image_size), "--classes",
            str(args.classes), "--steps", str(args.steps), "--warmup", str(args.warmup)]


def run_tcv(args):
    return tcv_train_step(args.build, "ssd300", args.threads, shape_args(args))


def run_torch(args):
    return torch_train_step("ssd300_torch.py", args.threads, shape_args(args))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--image-size", type=int, default=300)
    p.add_argument("--classes", type=int, default=21)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    args = p.parse_args()
    tcv, torch = [], []
    for r in range(args.rounds):
        tcv.append(run_tcv(args))
        torch.append(run_torch(args))
        print(f"round {r + 1}: tcv {tcv[-1]['images_per_sec']:.2f} img/s "
              f"{tcv[-1]['peak_rss_bytes'] / 2**20:.0f} MiB, pytorch "
              f"{torch[-1]['images_per_sec']:.2f} img/s "
              f"{torch[-1]['peak_rss_bytes'] / 2**20:.0f} MiB", file=sys.stderr)

    def med(runs, key):
        return statistics.median(r[key] for r in runs)

    it, ip = med(tcv, "images_per_sec"), med(torch, "images_per_sec")
    rt, rp = med(tcv, "peak_rss_bytes") / 2**20, med(torch, "peak_rss_bytes") / 2**20
    print(f"ssd300 train step (MultiBox loss), batch {args.batch} of 3x{args.image_size}x"
          f"{args.image_size}, {args.classes} classes, {args.threads} threads, median of "
          f"{args.rounds} interleaved rounds ({args.steps} timed steps after {args.warmup} warm-up)")
    print(f"  {'':8s} {'images/s':>10s} {'ms/step':>10s} {'peak RSS MiB':>13s} {'params':>10s}")
    for name, runs in (("tcv", tcv), ("pytorch", torch)):
        print(f"  {name:8s} {med(runs, 'images_per_sec'):10.2f} {med(runs, 'ms_per_step'):10.1f} "
              f"{med(runs, 'peak_rss_bytes') / 2**20:13.0f} {runs[0]['parameters']:10d}")
    print(f"  ratio    {it / ip:10.2f}x{'':10s} {rt / rp:12.2f}x")
    print(json.dumps({"model": "ssd300", "batch": args.batch, "threads": args.threads,
                      "rounds": args.rounds, "tcv_images_per_sec": it, "torch_images_per_sec": ip,
                      "speed_ratio": it / ip, "tcv_peak_rss_mib": rt, "torch_peak_rss_mib": rp}))


if __name__ == "__main__":
    main()
