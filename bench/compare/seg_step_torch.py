#!/usr/bin/env python3
"""PyTorch side of bench/compare/seg_step.py: one segmentation training step as
`tcv-bench train --model NAME` runs it.

NAME is deeplabv3_resnet50 (torchvision 0.14's, aux_loss=True) or pspnet_resnet50
(the PSPNet of scripts/make_golden_seg.py: torchvision's dilated ResNet-50, pyramid
pooling 1/2/3/6 -> 3x3 conv 512 -> Dropout2d(0.1) -> 1x1 conv, FCN-style aux head with
Dropout2d). A synthetic batch (B, 3, S, S) with (B, S, S) masks, 5% of the pixels 255;
loss = CE(out, ignore_index=255) + 0.4 * CE(aux, ignore_index=255); SGD momentum 0.9.
Prints one JSON line: images/s (batch / median step time), ms/step, peak RSS (maxrss).

    GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \\
    /usr/bin/python3 bench/compare/seg_step_torch.py --model deeplabv3_resnet50 --threads 2
"""
import os
import sys

import torch
import torch.nn.functional as F
from common import time_torch_step, torch_step_parser

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from make_golden_seg import PSPNet  # noqa: E402


def make_model(name, classes):
    if name == "deeplabv3_resnet50":
        from torchvision.models.segmentation import deeplabv3_resnet50
        return deeplabv3_resnet50(weights=None, weights_backbone=None, num_classes=classes,
                                  aux_loss=True)
    if name == "pspnet_resnet50":
        return PSPNet(classes, 50)
    raise SystemExit(f"unknown model {name}")


def main():
    p = torch_step_parser(4, 256, 5, 2, classes=21, model="deeplabv3_resnet50")
    p.add_argument("--aux-weight", type=float, default=0.4)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    net = make_model(args.model, args.classes)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    s = args.image_size
    x = torch.randn(args.batch, 3, s, s)
    y = torch.randint(0, args.classes, (args.batch, s, s))
    y[torch.rand(args.batch, s, s) < 0.05] = 255

    def loss_of():
        out = net(x)
        return F.cross_entropy(out["out"], y, ignore_index=255) + \
            args.aux_weight * F.cross_entropy(out["aux"], y, ignore_index=255)

    time_torch_step(args, args.model, net, opt, loss_of)


if __name__ == "__main__":
    main()
