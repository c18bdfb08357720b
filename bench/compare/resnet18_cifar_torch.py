#!/usr/bin/env python3
"""PyTorch side of the training-step comparisons (bench/compare/resnet18_cifar.py).

The same model and step as `tcv-bench train --model NAME`, for NAME in
resnet18_cifar (ResNet-18 with a CIFAR stem: conv 3x3 stride 1, no max-pool),
resnet50, mobilenet_v2 and vgg11_bn: torchvision's architectures as written out in
scripts/make_golden_cls.py (torchvision may be absent), a synthetic batch,
cross-entropy, SGD (momentum 0.9). Times each step after warm-up and prints one
JSON line with images/s (batch / median step time), ms/step and peak RSS
(getrusage maxrss).

Run with Debian's PyTorch and glibc malloc tuned as PyTorch's users do:
    GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \
    /usr/bin/python3 bench/compare/resnet18_cifar_torch.py --threads 2
"""
import os
import sys

import torch
import torch.nn as nn
from common import time_torch_step, torch_step_parser

# torchvision's models without torchvision: the ones the golden tests use.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from make_golden_cls import VGG, BasicBlock, Bottleneck, MobileNetV2, ResNet  # noqa: E402

MODELS = {
    "resnet18_cifar": lambda k: ResNet(BasicBlock, [2, 2, 2, 2], k, cifar=True),
    "resnet50": lambda k: ResNet(Bottleneck, [3, 4, 6, 3], k),
    "mobilenet_v2": lambda k: MobileNetV2(num_classes=k),
    "vgg11_bn": lambda k: VGG("A", batch_norm=True, num_classes=k),
}


def main():
    p = torch_step_parser(64, 32, 20, 5, classes=10)
    p.add_argument("--model", default="resnet18_cifar", choices=sorted(MODELS))
    p.add_argument("--channels", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    assert args.channels == 3, "these models take 3 input channels"
    net = MODELS[args.model](args.classes)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(args.batch, args.channels, args.image_size, args.image_size)
    y = torch.randint(0, args.classes, (args.batch,))

    time_torch_step(args, args.model, net, opt, lambda: loss_fn(net(x), y))


if __name__ == "__main__":
    main()
