#!/usr/bin/env python3
"""PyTorch side of bench/compare/openpose_step.py: one OpenPose training step as
`tcv-bench train --model openpose` (or openpose_lite) runs it.

The module is built to models/pose/openpose.h's spec, with the same names:
features.{0..22} VGG-19 conv1_1 .. relu4_2 (3x3 convolutions with ReLU, 2x2 max
pools after conv1_2, conv2_2 and conv3_4), model0 the CPM adapter (3x3 512->256,
3x3 256->128, each with ReLU), model1_{1,2} the first stage's branches (3x 3x3 128,
1x1 512, 1x1 -> 38 PAF / 19 heatmap channels) and model{2..6}_{1,2} the refinement
stages on cat(paf, heatmap, model0's features) (5x 7x7 128, 1x1 128, 1x1 -> 38 / 19),
ReLU after every convolution of a branch but its last. openpose_lite divides every
width by 4, puts BatchNorm after the backbone's convolutions (which lose their bias)
and keeps two refinement stages. Initialisation as TorchCV's: the backbone
kaiming_normal_(fan_out, relu) as torchvision's VGG, the rest normal_(0, 0.01), biases 0.

The loss is TorchCV's OpenPose loss: per stage and branch MSELoss(reduction='sum')
between output * mask and target * mask, divided by the batch size, summed over the
stages. Synthetic batch: normal (B, 3, S, S) images; heatmaps uniform in [0, 1), PAFs
uniform in [-1, 1), a (B, 1, S/8, S/8) mask with 5% zeros. SGD momentum 0.9 at a
learning rate of 1e-5 (the loss sums about 10^5 values per image; 0.01 diverges). Prints the
parameter count to stderr and one JSON line: images/s (batch / median step time),
ms/step, peak RSS (getrusage maxrss).

    GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \\
    /usr/bin/python3 bench/compare/openpose_step_torch.py --model openpose --threads 2
"""
import sys

import torch
import torch.nn as nn
from common import time_torch_step, torch_step_parser


def conv_relu(layers, cin, cout, k, bn=False, relu=True):
    layers.append(nn.Conv2d(cin, cout, k, padding=k // 2, bias=not bn))
    if bn:
        layers.append(nn.BatchNorm2d(cout))
    if relu:
        layers.append(nn.ReLU(inplace=True))


def branch(cin, convs):
    """TorchCV's _make_layers: convolutions with ReLU between them, none after the last."""
    layers = []
    for i, (cout, k) in enumerate(convs):
        conv_relu(layers, cin, cout, k, relu=i + 1 < len(convs))
        cin = cout
    return nn.Sequential(*layers)


class OpenPose(nn.Module):
    def __init__(self, paf=38, heat=19, refinement_stages=5, div=1, bn=False, k=7):
        super().__init__()
        w = lambda c: c // div  # noqa: E731
        layers, cin = [], 3
        for v in (64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512):
            if v == 0:
                layers.append(nn.MaxPool2d(2, 2))
                continue
            conv_relu(layers, cin, w(v), 3, bn=bn)
            cin = w(v)
        self.features = nn.Sequential(*layers)
        layers = []
        conv_relu(layers, w(512), w(256), 3)
        conv_relu(layers, w(256), w(128), 3)
        self.model0 = nn.Sequential(*layers)
        c = w(128)
        l1s, l2s = [], []
        for s in range(refinement_stages + 1):
            if s == 0:
                l1s.append(branch(c, [(c, 3), (c, 3), (c, 3), (w(512), 1), (paf, 1)]))
                l2s.append(branch(c, [(c, 3), (c, 3), (c, 3), (w(512), 1), (heat, 1)]))
            else:
                cin = c + paf + heat
                l1s.append(branch(cin, [(c, k)] * 5 + [(c, 1), (paf, 1)]))
                l2s.append(branch(cin, [(c, k)] * 5 + [(c, 1), (heat, 1)]))
        # TorchCV's PoseModel registers every PAF branch, then every heatmap branch.
        for s, l1 in enumerate(l1s):
            setattr(self, f"model{s + 1}_1", l1)
        for s, l2 in enumerate(l2s):
            setattr(self, f"model{s + 1}_2", l2)
        self.stages = list(zip(l1s, l2s))
        for m in self.features.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        rest = [self.model0] + [b for pair in self.stages for b in pair]
        for seq in rest:
            for m in seq.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.normal_(m.weight, 0.0, 0.01)
                    nn.init.zeros_(m.bias)

    def forward(self, x):
        base = self.model0(self.features(x))
        pafs, heats = [], []
        h = base
        for s, (l1, l2) in enumerate(self.stages):
            if s > 0:
                h = torch.cat([pafs[-1], heats[-1], base], 1)
            pafs.append(l1(h))
            heats.append(l2(h))
        return pafs, heats


def make_model(name):
    if name == "openpose":
        return OpenPose()
    if name == "openpose_lite":
        return OpenPose(div=4, bn=True, refinement_stages=2)
    raise SystemExit(f"unknown model {name}")


def openpose_loss(pafs, heats, paf_t, heat_t, mask):
    mse = nn.MSELoss(reduction="sum")
    n = pafs[0].size(0)
    paf_t, heat_t = paf_t * mask, heat_t * mask
    total = 0
    for p, h in zip(pafs, heats):
        total = total + mse(p * mask, paf_t) / n + mse(h * mask, heat_t) / n
    return total


def main():
    p = torch_step_parser(2, 368, 3, 1, model="openpose", bf16=False)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    net = make_model(args.model)
    net.train()
    params = sum(t.numel() for t in net.parameters())
    print(f"{args.model}: {params} parameters", file=sys.stderr, flush=True)
    opt = torch.optim.SGD(net.parameters(), lr=1e-5, momentum=0.9)
    b, s = args.batch, args.image_size
    h = s // 8
    x = torch.randn(b, 3, s, s)
    npaf, nheat = net.stages[0][0][-1].out_channels, net.stages[0][1][-1].out_channels
    heat_t = torch.rand(b, nheat, h, h)
    paf_t = torch.rand(b, npaf, h, h) * 2 - 1
    mask = (torch.rand(b, 1, h, h) >= 0.05).float()

    def loss_of():
        pafs, heats = net(x)
        return openpose_loss(pafs, heats, paf_t, heat_t, mask)

    time_torch_step(args, args.model, net, opt, loss_of, loss="openpose_masked_l2")


if __name__ == "__main__":
    main()
