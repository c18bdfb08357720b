#!/usr/bin/env python3
"""Side by side: tcv vs PyTorch 1.13 training ResNet-18 (CIFAR stem) on the CPU.

Interleaves runs (tcv, torch, tcv, torch, ...) because these machines are noisy,
then prints the median images/s and peak RSS of each and the ratios. Both use
the same number of threads (2 by default); PyTorch runs with its fastest malloc
settings. Each run is a fresh process, so peak RSS is that of one run.

    /usr/bin/python3 bench/compare/resnet18_cifar.py [--build build] [--rounds 3]
        [--conv-algo auto|direct] [--model resnet18_cifar|mobilenet_v2]
"""
import argparse
import json
import statistics
import sys

from common import tcv_train_step, torch_train_step


def shape_args(args):
    return ["--batch", str(args.batch), "--image-size", str(args.image_size), "--channels", "3",
            "--classes", "10", "--steps", str(args.steps), "--warmup", str(args.warmup)]


def run_tcv(args):
    return tcv_train_step(args.build, args.model, args.threads,
                          [*shape_args(args), "--conv-algo", args.conv_algo])


def run_torch(args):
    return torch_train_step("resnet18_cifar_torch.py", args.threads,
                            ["--model", args.model, *shape_args(args)])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--model", default="resnet18_cifar", help="tcv's model name")
    p.add_argument("--conv-algo", default="auto", choices=["auto", "direct", "winograd"],
                   help="tcv's CPU convolution algorithm (direct is PyTorch's)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args()
    tcv, torch = [], []
    for r in range(args.rounds):
        tcv.append(run_tcv(args))
        torch.append(run_torch(args))
        print(f"round {r + 1}: tcv {tcv[-1]['images_per_sec']:.1f} img/s "
              f"{tcv[-1]['peak_rss_bytes'] / 2**20:.0f} MiB, pytorch "
              f"{torch[-1]['images_per_sec']:.1f} img/s {torch[-1]['peak_rss_bytes'] / 2**20:.0f} MiB",
              file=sys.stderr)

    def med(runs, key):
        return statistics.median(r[key] for r in runs)

    it, ip = med(tcv, "images_per_sec"), med(torch, "images_per_sec")
    rt, rp = med(tcv, "peak_rss_bytes") / 2**20, med(torch, "peak_rss_bytes") / 2**20
    print(f"{args.model} train step, batch {args.batch} of 3x{args.image_size}x{args.image_size}, "
          f"{args.threads} threads, tcv conv {args.conv_algo}, "
          f"median of {args.rounds} interleaved rounds "
          f"({args.steps} timed steps after {args.warmup} warm-up each)")
    print(f"  {'':8s} {'images/s':>10s} {'ms/step':>10s} {'peak RSS MiB':>13s} {'params':>10s}")
    for name, runs in (("tcv", tcv), ("pytorch", torch)):
        print(f"  {name:8s} {med(runs, 'images_per_sec'):10.1f} {med(runs, 'ms_per_step'):10.1f} "
              f"{med(runs, 'peak_rss_bytes') / 2**20:13.0f} {runs[0]['parameters']:10d}")
    print(f"  ratio    {it / ip:10.2f}x{'':10s} {rt / rp:12.2f}x")
    print(json.dumps({"model": args.model, "conv_algo": args.conv_algo, "batch": args.batch,
                      "threads": args.threads,
                      "rounds": args.rounds, "tcv_images_per_sec": it, "torch_images_per_sec": ip,
                      "speed_ratio": it / ip, "tcv_peak_rss_mib": rt, "torch_peak_rss_mib": rp,
                      "tcv_allocator_peak_mib": med(tcv, "allocator_peak_bytes") / 2**20}))


if __name__ == "__main__":
    main()
