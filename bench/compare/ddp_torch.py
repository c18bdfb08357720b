#!/usr/bin/env python3
"""PyTorch side of the DDP training-step comparison (bench/compare/ddp.py).

One rank of torch.nn.parallel.DistributedDataParallel over Gloo, started with
RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in the environment (ddp.py sets
them), 1 thread. The model mirrors tcv's fmnist_resnet (models/cls/fmnist.cpp):
3x3 conv 32 (no bias) + BN + ReLU, layer1/2/3 of two torchvision BasicBlocks at
32, 64 (stride 2), 128 (stride 2), global average pool, fc 10. Each step:
forward, cross-entropy, backward (bucketed all-reduce, bucket_cap_mb 25),
SGD momentum 0.9, on one synthetic per-rank batch of 1x28x28. Rank 0 prints
one JSON line with the global images/s (median over repeats).

    GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \
    RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 /usr/bin/python3 ddp_torch.py
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn

from torch_blocks import BasicBlock


class FmnistResNet(nn.Module):
    def __init__(self, num_classes=10, in_channels=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 32, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = nn.Sequential(BasicBlock(32, 32), BasicBlock(32, 32))
        self.layer2 = nn.Sequential(BasicBlock(32, 64, 2), BasicBlock(64, 64))
        self.layer3 = nn.Sequential(BasicBlock(64, 128, 2), BasicBlock(128, 128))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(128, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    net = FmnistResNet()
    assert sum(p.numel() for p in net.parameters()) == 696042
    ddp = nn.parallel.DistributedDataParallel(net, bucket_cap_mb=25)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    torch.manual_seed(1 + rank)
    x = torch.randn(args.batch, 1, 28, 28)
    y = torch.randint(0, 10, (args.batch,))

    def step():
        opt.zero_grad(set_to_none=False)
        loss_fn(ddp(x), y).backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    rates = []
    for _ in range(args.repeats):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        rates.append(args.steps * args.batch * world / (time.perf_counter() - t0))
    if rank == 0:
        print(json.dumps({"model": "fmnist_resnet", "world": world, "batch_per_rank": args.batch,
                          "images_per_sec": statistics.median(rates)}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
