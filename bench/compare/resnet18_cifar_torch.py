#!/usr/bin/env python3
"""PyTorch side of the ResNet-18 (CIFAR stem) training-step comparison.

The same model and step as `tcv-bench train --model resnet18_cifar`: torchvision's
ResNet-18 with a CIFAR stem (conv 3x3 stride 1, no max-pool), defined here since
torchvision may be absent; a synthetic batch of 3x32x32, cross-entropy, SGD
(momentum 0.9). Times each step after warm-up and prints one JSON line with
images/s (batch / median step time), ms/step and peak RSS (getrusage maxrss).

Run with Debian's PyTorch and glibc malloc tuned as PyTorch's users do:
    GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \
    /usr/bin/python3 bench/compare/resnet18_cifar_torch.py --threads 2
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn

from torch_blocks import BasicBlock

# torchvision's MobileNetV2 without torchvision: the one the golden tests use.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from make_golden_cls import MobileNetV2  # noqa: E402


class ResNet18Cifar(nn.Module):
    """torchvision.models.resnet18 with conv1 = 3x3 stride 1 and no max-pool."""

    def __init__(self, num_classes=10, in_channels=3):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(64, 2, 1)
        self.layer2 = self._make_layer(128, 2, 2)
        self.layer3 = self._make_layer(256, 2, 2)
        self.layer4 = self._make_layer(512, 2, 2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _make_layer(self, planes, blocks, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride, bias=False),
                                       nn.BatchNorm2d(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet18_cifar", choices=["resnet18_cifar", "mobilenet_v2"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.model == "mobilenet_v2":
        assert args.channels == 3, "MobileNetV2 here takes 3 input channels"
        net = MobileNetV2(num_classes=args.classes)
    else:
        net = ResNet18Cifar(args.classes, args.channels)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(args.batch, args.channels, args.image_size, args.image_size)
    y = torch.randint(0, args.classes, (args.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    ms = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = step()
        ms.append(1000.0 * (time.perf_counter() - t0))
    med = statistics.median(ms)
    print(json.dumps({
        "bench": "train", "impl": "pytorch", "torch": torch.__version__, "model": args.model,
        "threads": torch.get_num_threads(), "batch": args.batch, "image_size": args.image_size,
        "parameters": sum(t.numel() for t in net.parameters()),
        "images_per_sec": 1000.0 * args.batch / med, "ms_per_step": med,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "final_loss": loss.item()}))


if __name__ == "__main__":
    main()
