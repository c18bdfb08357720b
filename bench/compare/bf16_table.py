#!/usr/bin/env python3
"""bf16 mixed precision on the CPU, side by side (issue 28): per model, one
training step of tcv f32, tcv bf16 (`tcv-bench train --dtype bf16`), PyTorch
1.13 f32 and PyTorch bf16 (torch.autocast("cpu", torch.bfloat16) around the
forward and the loss), 2 threads each, PyTorch with its fastest malloc
settings. The four run interleaved (round after round, a fresh process each,
because these machines are noisy); the medians of images/s and peak RSS are
printed with the ratios the issue asks for, the CPU's name and the load.

    /usr/bin/python3 bench/compare/bf16_table.py [--build build] [--rounds 3]
        [--models resnet18_cifar,ssd300,deeplabv3_resnet50]
"""
import argparse
import json
import statistics
import sys

from common import tcv_train_step, torch_train_step

# (tcv-bench shape flags, PyTorch script and its flags) per model, at the
# shapes the other bench/compare scripts use.
MODELS = {
    "resnet18_cifar": (["--batch", "64", "--image-size", "32", "--classes", "10"],
                       "resnet18_cifar_torch.py",
                       ["--model", "resnet18_cifar", "--batch", "64", "--image-size", "32",
                        "--classes", "10"]),
    "ssd300": (["--batch", "4", "--image-size", "300", "--classes", "21"], "ssd300_torch.py",
               ["--batch", "4", "--image-size", "300", "--classes", "21"]),
    "deeplabv3_resnet50": (["--batch", "4", "--image-size", "256", "--classes", "21"],
                           "seg_step_torch.py",
                           ["--model", "deeplabv3_resnet50", "--batch", "4", "--image-size", "256",
                            "--classes", "21"]),
    "pspnet_resnet50": (["--batch", "4", "--image-size", "256", "--classes", "21"],
                        "seg_step_torch.py",
                        ["--model", "pspnet_resnet50", "--batch", "4", "--image-size", "256",
                         "--classes", "21"]),
}


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "?"


def load():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run_tcv(args, model, dtype):
    shape, _, _ = MODELS[model]
    return tcv_train_step(args.build, model, args.threads,
                          [*shape, "--steps", str(args.steps), "--warmup", str(args.warmup),
                           "--dtype", dtype])


def run_torch(args, model, dtype):
    _, script, flags = MODELS[model]
    return torch_train_step(script, args.threads, [*flags, "--steps", str(args.steps), "--warmup",
                                                   str(args.warmup), "--dtype", dtype])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--models", default="resnet18_cifar,ssd300,deeplabv3_resnet50")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    args = p.parse_args()
    variants = [("tcv", "f32", run_tcv), ("tcv", "bf16", run_tcv),
                ("pytorch", "f32", run_torch), ("pytorch", "bf16", run_torch)]
    loads = [load()]
    summary = {"cpu": cpu_name(), "threads": args.threads, "rounds": args.rounds, "models": {}}
    print(f"{summary['cpu']}, {args.threads} threads, medians of {args.rounds} interleaved rounds "
          f"({args.steps} timed steps after {args.warmup} warm-up)")
    for model in args.models.split(","):
        runs = {(impl, dt): [] for impl, dt, _ in variants}
        for r in range(args.rounds):
            for impl, dt, fn in variants:
                out = fn(args, model, dt)
                runs[(impl, dt)].append(out)
                loads.append(load())
                print(f"{model} round {r + 1} {impl} {dt}: {out['images_per_sec']:.3f} img/s "
                      f"{out['peak_rss_bytes'] / 2**20:.0f} MiB (load {loads[-1]:.1f})",
                      file=sys.stderr, flush=True)
        med = {k: (statistics.median(x["images_per_sec"] for x in v),
                   statistics.median(x["peak_rss_bytes"] for x in v) / 2**20)
               for k, v in runs.items()}
        print(f"{model}")
        for (impl, dt), (ips, rss) in med.items():
            print(f"  {impl:8s} {dt:5s} {ips:9.3f} images/s {rss:8.0f} MiB")
        tb, tf = med[("tcv", "bf16")][0], med[("tcv", "f32")][0]
        pb, pf = med[("pytorch", "bf16")][0], med[("pytorch", "f32")][0]
        print(f"  tcv bf16 / tcv f32 {tb / tf:.2f}x, tcv bf16 / pytorch bf16 {tb / pb:.2f}x, "
              f"tcv f32 / pytorch f32 {tf / pf:.2f}x, pytorch bf16 / pytorch f32 {pb / pf:.2f}x")
        summary["models"][model] = {f"{impl}_{dt}": {"images_per_sec": ips, "peak_rss_mib": rss}
                                    for (impl, dt), (ips, rss) in med.items()}
    summary["load_min_max"] = [min(loads), max(loads)]
    print(f"1-minute load during the runs: {min(loads):.1f} to {max(loads):.1f}")
    print(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(main())
