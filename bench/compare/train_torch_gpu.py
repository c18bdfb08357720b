#!/usr/bin/env python3
"""PyTorch eager on the GPU: the same training step as
`tcv-bench train --device cuda --model NAME --dtype f32|bf16|f16`.

Model from torchvision (resnet18/34/50/101; resnet18_cifar = resnet18 with a
3x3 stride-1 stem and no max-pool) with cross-entropy on a synthetic batch;
ssd300: torchvision's ssd300_vgg16 with its MultiBox loss (SSDMatcher,
compute_loss) on 1 + b % 4 synthetic boxes per image, as bench/compare/
ssd300_torch.py; deeplabv3_resnet50 (torchvision's, aux_loss) and
pspnet_resnet50 (scripts/make_golden_seg.py's) with CE(out) + 0.4 CE(aux),
ignore_index 255, on (B, S, S) masks with 5% ignored pixels, as
bench/compare/seg_step_torch.py. SGD with momentum 0.9; torch.backends.cudnn.benchmark = True, TF32 off (as tcv's
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

import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

SEG_MODELS = ("deeplabv3_resnet50", "pspnet_resnet50")


def make_model(name, classes, channels):
    if name == "ssd300":
        from torchvision.models.detection import ssd300_vgg16
        return ssd300_vgg16(weights=None, weights_backbone=None, num_classes=classes)
    if name == "deeplabv3_resnet50":
        from torchvision.models.segmentation import deeplabv3_resnet50
        return deeplabv3_resnet50(weights=None, weights_backbone=None, num_classes=classes,
                                  aux_loss=True)
    if name == "pspnet_resnet50":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                        "scripts"))
        from make_golden_seg import PSPNet
        return PSPNet(classes, 50)
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
    s = a.image_size
    if a.model in SEG_MODELS:
        y = torch.randint(0, a.classes, (a.batch, s, s), device=dev)
        y[torch.rand(a.batch, s, s, device=dev) < 0.05] = 255
    if a.model == "ssd300":
        from torchvision.models.detection.image_list import ImageList
        from torchvision.ops import boxes as box_ops
        gen = torch.Generator().manual_seed(7)
        targets = []
        for b in range(a.batch):
            n = 1 + b % 4
            wh = 0.1 * s + 0.4 * s * torch.rand(n, 2, generator=gen)
            xy = torch.rand(n, 2, generator=gen) * (s - wh)
            targets.append({"boxes": torch.cat([xy, xy + wh], 1).to(dev),
                            "labels": torch.randint(1, max(a.classes, 2), (n,),
                                                    generator=gen).to(dev)})
        images = ImageList(x, [(s, s)] * a.batch)
    amp = a.dtype != "f32"
    amp_dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    scaler = torch.cuda.amp.GradScaler() if a.dtype == "f16" else None
    loss_fn = nn.CrossEntropyLoss()

    def forward_loss():
        if a.model == "ssd300":  # SSD.forward's training path without its transform
            features = list(model.backbone(x).values())
            head = model.head(features)
            anchors = model.anchor_generator(images, features)
            matched = [model.proposal_matcher(box_ops.box_iou(t["boxes"], an))
                       for an, t in zip(anchors, targets)]
            head = {k: v.float() for k, v in head.items()}
            losses = model.compute_loss(targets, head, anchors, matched)
            return losses["bbox_regression"] + losses["classification"]
        if a.model in SEG_MODELS:
            out = model(x)
            return (F.cross_entropy(out["out"].float(), y, ignore_index=255) +
                    0.4 * F.cross_entropy(out["aux"].float(), y, ignore_index=255))
        return loss_fn(model(x).float(), y)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=amp_dtype, enabled=amp):
            loss = forward_loss()
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
