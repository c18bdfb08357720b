#!/usr/bin/env python3
"""Side by side: tcv vs PyTorch 1.13 + torchvision 0.14 training segmentation models
on the CPU: deeplabv3_resnet50 (torchvision's) and PSPNet-R50 (scripts/make_golden_seg.py's
PyTorch module, the same structure as tcv's pspnet_resnet50), batch 4 of 256x256, 21
classes, CE + 0.4 aux (ignore_index 255), SGD momentum 0.9.

Interleaves runs (tcv, torch, tcv, torch, ...) per model because these machines are noisy,
then prints the median images/s and peak RSS of each and the ratios. Both use the same
number of threads (2 by default); PyTorch runs with its fastest malloc settings. Each run
is a fresh process, so peak RSS is that of one run.

    /usr/bin/python3 bench/compare/seg_step.py [--build build] [--rounds 3]
        [--models deeplabv3_resnet50,pspnet_resnet50] [--conv-algo auto|direct]
"""
import argparse
import json
import statistics
import sys

from common import tcv_train_step, torch_train_step


def shape_args(args):
    return ["--batch", str(args.batch), "--image-size", str(args.image_size),
            "--classes", str(args.classes), "--steps", str(args.steps),
            "--warmup", str(args.warmup)]


def run_tcv(args, model):
    return tcv_train_step(args.build, model, args.threads,
                          [*shape_args(args), "--conv-algo", args.conv_algo])


def run_torch(args, model):
    return torch_train_step("seg_step_torch.py", args.threads, ["--model", model, *shape_args(args)])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--models", default="deeplabv3_resnet50,pspnet_resnet50")
    p.add_argument("--conv-algo", default="auto", choices=["auto", "direct", "winograd"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--image-size", type=int, default=256)
    p.add_argument("--classes", type=int, default=21)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    args = p.parse_args()
    models = args.models.split(",")
    runs = {m: {"tcv": [], "pytorch": []} for m in models}
    for r in range(args.rounds):
        for m in models:
            runs[m]["tcv"].append(run_tcv(args, m))
            runs[m]["pytorch"].append(run_torch(args, m))
            t, q = runs[m]["tcv"][-1], runs[m]["pytorch"][-1]
            print(f"round {r + 1} {m}: tcv {t['images_per_sec']:.3f} img/s "
                  f"{t['peak_rss_bytes'] / 2**20:.0f} MiB, pytorch {q['images_per_sec']:.3f} img/s "
                  f"{q['peak_rss_bytes'] / 2**20:.0f} MiB", file=sys.stderr, flush=True)

    def med(rs, key):
        return statistics.median(x[key] for x in rs)

    print(f"segmentation train step, batch {args.batch} of 3x{args.image_size}x{args.image_size}, "
          f"{args.classes} classes, CE + 0.4 aux, {args.threads} threads, tcv conv "
          f"{args.conv_algo}, median of {args.rounds} interleaved rounds ({args.steps} timed "
          f"steps after {args.warmup} warm-up each)")
    print(f"  {'model':20s} {'':8s} {'images/s':>9s} {'ms/step':>9s} {'peak RSS MiB':>13s} "
          f"{'params':>10s}")
    summary = []
    for m in models:
        for name in ("tcv", "pytorch"):
            rs = runs[m][name]
            print(f"  {m:20s} {name:8s} {med(rs, 'images_per_sec'):9.3f} {med(rs, 'ms_per_step'):9.0f} "
                  f"{med(rs, 'peak_rss_bytes') / 2**20:13.0f} {rs[0]['parameters']:10d}")
        it, ip = med(runs[m]["tcv"], "images_per_sec"), med(runs[m]["pytorch"], "images_per_sec")
        rt = med(runs[m]["tcv"], "peak_rss_bytes") / 2**20
        rp = med(runs[m]["pytorch"], "peak_rss_bytes") / 2**20
        print(f"  {m:20s} {'ratio':8s} {it / ip:8.2f}x {'':9s} {rt / rp:12.2f}x")
        summary.append({"model": m, "tcv_images_per_sec": it, "torch_images_per_sec": ip,
                        "speed_ratio": it / ip, "tcv_peak_rss_mib": rt, "torch_peak_rss_mib": rp})
    print(json.dumps({"batch": args.batch, "image_size": args.image_size, "threads": args.threads,
                      "rounds": args.rounds, "conv_algo": args.conv_algo, "models": summary}))


if __name__ == "__main__":
    main()
