#!/usr/bin/env python3
"""PyTorch eager on the GPU: the same training step as
`tcv-bench train --device cuda --model NAME --dtype f32|bf16|f16`.

Model from torchvision (resnet18/34/50/101; resnet18_cifar = resnet18 with a
3x3 stride-1 stem and no max-pool), a synthetic batch, cross-entropy, SGD with
momentum 0.9; torch.backends.cudnn.benchmark = True, TF32 off (as tcv's
default); bf16/f16 through torch.autocast (f16 with GradScaler). Each step is
timed to its end (synchronize) after warm-up; prints one JSON line with
images/s (batch / median step), ms/step and peak device memory
(torch.cuda.max_memory_allocated over the timed steps). With --profile N, N
more steps run under torch.profiler and its table of CUDA kernels (device time
per step, largest first) goes to stderr, to set beside `tcv-bench train
--profile`.
"""
import sys
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torchvision


def make_model(name, classes, channels):
    if name == "resnet18_cifar":
        m = torchvision.models.resnet18(num_classes=classes)
        m.conv1 = nn.Conv2d(channels, 64, 3, 1, 1, bias=False)
        m.maxpool = nn.Identity()
        return m
    m = getattr(torchvision.models, name)(num_classes=classes)
    if channels != 3:
        m.conv1 = nn.Conv2d(channels, 64, 7, 2, 3, bias=False)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"])
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    a = ap.parse_args()

    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = make_model(a.model, a.classes, a.channels).to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(a.batch, a.channels, a.image_size, a.image_size, device=dev)
    y = torch.randint(0, a.classes, (a.batch,), device=dev)
    amp = a.dtype != "f32"
    amp_dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    scaler = torch.cuda.amp.GradScaler() if a.dtype == "f16" else None
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=amp_dtype, enabled=amp):
            loss = loss_fn(model(x).float(), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        loss = step()
        times.append((time.perf_counter() - t0) * 1000.0)
    ms = statistics.median(times)
    peak = torch.cuda.max_memory_allocated()
    if a.profile > 0:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(a.profile):
                step()
        print(f"torch kernels over {a.profile} steps (totals; divide by {a.profile} per step):",
              file=sys.stderr)
        avg = prof.key_averages()
        try:  # torch >= 2.4 names it device time
            table = avg.table(sort_by="device_time_total", row_limit=30)
        except Exception:
            table = avg.table(sort_by="cuda_time_total", row_limit=30)
        print(table, file=sys.stderr)
    print(json.dumps({
        "bench": "train", "impl": "torch " + torch.__version__, "model": a.model,
        "device": "cuda", "dtype": a.dtype, "batch": a.batch, "image_size": a.image_size,
        "images_per_sec": 1000.0 * a.batch / ms, "ms_per_step": ms,
        "peak_bytes": peak, "final_loss": float(loss),
    }))


if __name__ == "__main__":
    main()
