#!/usr/bin/env python3
"""PyTorch side of the communication-hook comparison (bench/compare/comm_hooks.py).

One rank of torch.nn.parallel.DistributedDataParallel over Gloo, started with
RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in the environment (Debian's
torchrun is broken; comm_hooks.py starts the ranks), 1 thread, with one of
PyTorch 1.13's DDP comm hooks: none, bf16 (bf16_compress_hook), fp16
(fp16_compress_hook) or powersgd (powerSGD_hook with PowerSGDState).

  --mode bytes   a few steps on one synthetic batch; rank 0 prints the payload
                 bytes the hook's all-reduces carried in the last step (the
                 same count as tcv's ProcessGroup::stats: each all-reduce's
                 tensor bytes), beside the buckets' own, for fmnist_resnet or
                 resnet50 (torchvision's, 25,557,032 parameters). For powersgd
                 it first prints what powerSGD_hook's own rule predicts: on
                 Gloo, PyTorch 1.13 issues each bucket's P and Q all-reduces
                 from Gloo's completion threads, so ranks can issue them in
                 different orders, and ResNet-50's 5 buckets crash Gloo
                 ("op.preamble.length <= op.nbytes").
  --mode train   fmnist_resnet on Fashion-MNIST with tcv's fmnist_resnet.toml
                 recipe (batch 64 per rank, SGD 0.1 Nesterov momentum 0.9, weight
                 decay 5e-4, 200-iteration linear warm-up then cosine per
                 iteration, label smoothing 0.1, no augmentation); rank 0
                 prints the test top-1 after each epoch.

    GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \\
    RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 \\
    /usr/bin/python3 comm_hooks_torch.py --mode train --hook powersgd --epochs 2
"""
import argparse
import gzip
import json
import math
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

from ddp_torch import FmnistResNet


class Bottleneck(nn.Module):
    """torchvision's ResNet-50 block (stride on the 3x3 conv, v1.5)."""

    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        width, out = planes, planes * 4
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride, bias=False),
                                            nn.BatchNorm2d(out))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + identity)


class ResNet50(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, inplanes = [], 64
        for planes, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
            seq = []
            for b in range(blocks):
                seq.append(Bottleneck(inplanes, planes, stride if b == 0 else 1))
                inplanes = planes * 4
            layers.append(nn.Sequential(*seq))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


BYTES = [0]


def count_all_reduce():
    """Counts the bytes of every tensor handed to dist.all_reduce (the hooks call
    it through the torch.distributed module, so this sees theirs)."""
    real = dist.all_reduce

    def counting(tensor, *args, **kwargs):
        BYTES[0] += tensor.numel() * tensor.element_size()
        return real(tensor, *args, **kwargs)

    dist.all_reduce = counting


def register(ddp, hook, rank, start_iter):
    if hook == "none":
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)  # counted; same as no hook
    elif hook == "bf16":
        # PyTorch 1.13 refuses it without CUDA 11+ and NCCL 2.10+ (so on Gloo, here).
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
    elif hook == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif hook == "powersgd":
        state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=rank,
                                   start_powerSGD_iter=start_iter, min_compression_rate=2,
                                   use_error_feedback=True, warm_start=True)
        ddp.register_comm_hook(state, psgd.powerSGD_hook)
        return state
    else:
        raise SystemExit(f"unknown hook {hook}")
    return None


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def fashion_mnist(root, split):
    x = read_idx(os.path.join(root, f"{split}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(root, f"{split}-labels-idx1-ubyte.gz"))
    x = (torch.from_numpy(x.astype(np.float32)) / 255.0 - 0.2860) / 0.3530
    return x.unsqueeze(1), torch.from_numpy(y.astype(np.int64))


def mode_bytes(args, rank, world):
    torch.manual_seed(0)
    if args.model == "resnet50":
        net, shape = ResNet50(), (args.batch, 3, 32, 32)
        classes = 1000
    else:
        net, shape = FmnistResNet(), (args.batch, 1, 28, 28)
        classes = 10
    params = sum(p.numel() for p in net.parameters())
    if args.hook == "powersgd" and rank == 0:
        # What powerSGD_hook sends per compressed step, from its own rule
        # (_should_compress): (n + m) r per compressed matrix, the rest as it is.
        numel = 0
        for p in net.parameters():
            n, m = p.shape[0], p.numel() // p.shape[0]
            r = min(n, m, args.rank)
            worth, before, after = psgd._should_compress(n, m, r, 2)
            numel += after if worth else before
        print(json.dumps({"impl": "pytorch", "model": args.model, "hook": args.hook,
                          "predicted_bytes_per_step": 4 * numel}), flush=True)
    ddp = nn.parallel.DistributedDataParallel(net, bucket_cap_mb=25)
    register(ddp, args.hook, args.rank, args.start_iter)
    count_all_reduce()
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    torch.manual_seed(1 + rank)
    x, y = torch.randn(*shape), torch.randint(0, classes, (args.batch,))
    for _ in range(args.start_iter + 1):  # the last step compresses
        BYTES[0] = 0
        opt.zero_grad(set_to_none=False)
        nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    if rank == 0:
        bucket_bytes = 4 * params
        print(json.dumps({"impl": "pytorch", "model": args.model, "params": params,
                          "hook": args.hook, "bytes_per_step": BYTES[0],
                          "bucket_bytes_per_step": bucket_bytes,
                          "wire_ratio": round(bucket_bytes / max(BYTES[0], 1), 3)}), flush=True)


def mode_train(args, rank, world):
    torch.manual_seed(args.seed)
    x, y = fashion_mnist(args.data, "train")
    xt, yt = fashion_mnist(args.data, "t10k")
    net = FmnistResNet()
    ddp = nn.parallel.DistributedDataParallel(net, bucket_cap_mb=25)
    state = register(ddp, args.hook, args.rank, args.start_iter)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    per_rank = len(x) // world
    iters_per_epoch = per_rank // args.batch
    max_iters = iters_per_epoch * args.epochs
    warm = 200

    def lr_at(it):  # tcv's cosine per iteration with a linear warm-up (train/lr_policy.cpp)
        f = 0.5 * (1.0 + math.cos(math.pi * min(1.0, it / max_iters)))
        return f * ((it + 1) / warm if it < warm else 1.0)

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    sampler = torch.utils.data.distributed.DistributedSampler(
        torch.utils.data.TensorDataset(x, y), num_replicas=world, rank=rank, shuffle=True,
        seed=args.seed, drop_last=True)
    top1s, t0 = [], time.time()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        idx = torch.tensor(list(iter(sampler)))
        ddp.train()
        for i in range(iters_per_epoch):
            b = idx[i * args.batch:(i + 1) * args.batch]
            opt.zero_grad(set_to_none=False)
            loss = loss_fn(ddp(x[b]), y[b])
            loss.backward()
            opt.step()
            sched.step()
            it = epoch * iters_per_epoch + i + 1
            if args.log_every and rank == 0 and it % args.log_every == 0:
                print(f"iter {it}: loss {loss.item():.4f}", flush=True)
        if rank == 0:
            net.eval()
            with torch.no_grad():
                correct = sum((net(xt[i:i + 500]).argmax(1) == yt[i:i + 500]).sum().item()
                              for i in range(0, len(xt), 500))
            top1s.append(100.0 * correct / len(xt))
            print(f"epoch {epoch + 1}: top1 {top1s[-1]:.2f}% loss {loss.item():.4f} "
                  f"({time.time() - t0:.0f} s)", flush=True)
        dist.barrier()
    if rank == 0:
        out = {"impl": "pytorch", "hook": args.hook, "epochs": args.epochs, "top1": top1s[-1],
               "top1_per_epoch": top1s, "seconds": round(time.time() - t0, 1)}
        if state is not None:
            out["powersgd_compression"] = round(state.compression_stats()[0], 3)
        print(json.dumps(out), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["bytes", "train"], default="bytes")
    p.add_argument("--model", choices=["fmnist_resnet", "resnet50"], default="fmnist_resnet")
    p.add_argument("--hook", choices=["none", "bf16", "fp16", "powersgd"], default="none")
    p.add_argument("--rank", type=int, default=4, help="PowerSGD matrix_approximation_rank")
    p.add_argument("--start-iter", type=int, default=2, help="PowerSGD start_powerSGD_iter")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--log-every", type=int, default=0, help="train: rank 0 prints every N iters")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.mode == "bytes":
        mode_bytes(args, rank, world)
    else:
        mode_train(args, rank, world)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
