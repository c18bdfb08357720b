#!/usr/bin/env python3
"""PyTorch side of bench/compare/ssd300.py: torchvision 0.14's ssd300_vgg16
training step on the CPU, as `tcv-bench train --model ssd300` times it.

The step is SSD.forward in training mode without its GeneralizedRCNNTransform
(the normalisation and the resize to 300x300 belong to tcv's data pipeline, not
to its step): backbone, heads, default boxes, SSDMatcher on box_iou, compute_loss
(smooth-L1 + cross-entropy with 3:1 hard negatives), backward, SGD (momentum
0.9). Synthetic batch: normal images, image b with 1 + b % 4 boxes of 10% to
50% of the side, labels 1..classes-1. Prints one JSON line: images/s (batch /
median step time), ms/step, peak RSS (getrusage maxrss).

    GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \
    /usr/bin/python3 bench/compare/ssd300_torch.py --threads 2 --batch 4
"""

import torch
from torchvision.models.detection import ssd300_vgg16
from torchvision.models.detection.image_list import ImageList
from torchvision.ops import boxes as box_ops
from common import time_torch_step, torch_step_parser


def synthetic_targets(batch, size, classes, gen):
    targets = []
    for b in range(batch):
        n = 1 + b % 4
        wh = 0.1 * size + 0.4 * size * torch.rand(n, 2, generator=gen)
        xy = torch.rand(n, 2, generator=gen) * (size - wh)
        targets.append({"boxes": torch.cat([xy, xy + wh], 1),
                        "labels": torch.randint(1, max(classes, 2), (n,), generator=gen)})
    return targets


def main():
    p = torch_step_parser(4, 300, 5, 2, classes=21)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(7)
    model = ssd300_vgg16(weights=None, weights_backbone=None, num_classes=args.classes)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    s = args.image_size
    x = torch.randn(args.batch, 3, s, s)
    images = ImageList(x, [(s, s)] * args.batch)
    targets = synthetic_targets(args.batch, s, args.classes, gen)

    def loss_of():
        features = list(model.backbone(x).values())
        head_outputs = model.head(features)
        anchors = model.anchor_generator(images, features)
        matched = [model.proposal_matcher(box_ops.box_iou(t["boxes"], a))
                   for a, t in zip(anchors, targets)]
        losses = model.compute_loss(targets, head_outputs, anchors, matched)
        return losses["bbox_regression"] + losses["classification"]

    time_torch_step(args, "ssd300_vgg16", model, opt, loss_of)


if __name__ == "__main__":
    main()
