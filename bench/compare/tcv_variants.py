#!/usr/bin/env python3
"""tcv against tcv: one training step (`tcv-bench train`) of each model under
several settings, runs interleaved (A B A B ...) because these machines are
noisy, each a fresh process; prints the median images/s and peak RSS of each
setting and the ratios to the first. A setting is a list of tcv-bench flags,
e.g. the convolution algorithms or the mixed-precision dtype:

    /usr/bin/python3 bench/compare/tcv_variants.py --build build --rounds 2 \\
        --models ssd300,deeplabv3_resnet50,pspnet_resnet50,openpose \\
        --variants "--conv-algo winograd" "--conv-algo auto"

Each model runs at the shape bench/compare uses for it against PyTorch (SSD300
batch 4 at 300, DeepLabV3/PSPNet batch 4 at 256 with 21 classes, OpenPose batch
2 at 368, ResNet-18-CIFAR batch 64 at 32, Fashion-MNIST batch 64 at 28).
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

from common import last_json

SHAPES = {
    "ssd300": ["--batch", "4", "--image-size", "300", "--classes", "21"],
    "deeplabv3_resnet50": ["--batch", "4", "--image-size", "256", "--classes", "21"],
    "pspnet_resnet50": ["--batch", "4", "--image-size", "256", "--classes", "21"],
    "openpose": ["--batch", "2", "--image-size", "368"],
    "resnet18_cifar": ["--batch", "64", "--image-size", "32", "--classes", "10"],
    "fmnist_cnn": ["--batch", "64", "--image-size", "28", "--channels", "1", "--classes", "10"],
}


def run(args, model, variant):
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    cmd = [os.path.join(args.build, "apps", "tcv-bench"), "train", "--model", model,
           *SHAPES.get(model, []), "--steps", str(args.steps), "--warmup", str(args.warmup),
           *shlex.split(variant), "--json"]
    return last_json(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--models", default="ssd300,deeplabv3_resnet50,pspnet_resnet50,openpose")
    p.add_argument("--variants", nargs="+", default=["--conv-algo winograd", "--conv-algo auto"])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    args = p.parse_args()
    with open("/proc/loadavg") as f:
        print(f"load at start: {f.read().split()[0]}", file=sys.stderr)
    summary = {}
    for model in args.models.split(","):
        runs = {v: [] for v in args.variants}
        for r in range(args.rounds):
            for v in args.variants:
                runs[v].append(run(args, model, v))
                print(f"{model} round {r + 1} [{v}]: {runs[v][-1]['images_per_sec']:.3f} img/s "
                      f"{runs[v][-1]['peak_rss_bytes'] / 2**20:.0f} MiB", file=sys.stderr)
        base = statistics.median(x["images_per_sec"] for x in runs[args.variants[0]])
        summary[model] = {}
        print(f"{model} ({' '.join(SHAPES.get(model, []))}), median of {args.rounds} interleaved "
              f"rounds, {args.steps} timed steps after {args.warmup} warm-up")
        for v in args.variants:
            ips = statistics.median(x["images_per_sec"] for x in runs[v])
            rss = statistics.median(x["peak_rss_bytes"] for x in runs[v]) / 2**20
            summary[model][v] = {"images_per_sec": ips, "peak_rss_mib": rss}
            print(f"  {v:28s} {ips:8.3f} images/s {rss:8.0f} MiB  {ips / base:5.2f}x")
    with open("/proc/loadavg") as f:
        print(f"load at end: {f.read().split()[0]}", file=sys.stderr)
    print(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(main())
