#!/usr/bin/env python3
"""PyTorch side of the Fashion-MNIST small-CNN training-step comparison.

The same model and step as tcv's bench case FmnistCnnTrainStep: conv 32 3x3 ->
relu -> maxpool 2 -> conv 64 3x3 -> relu -> maxpool 2 -> fc 128 -> relu -> fc 10,
batch 64 of 1x28x28, cross-entropy, SGD (momentum 0.9). Prints one JSON line
with images/s (median over repeats).

Run with Debian's PyTorch: /usr/bin/python3 bench/compare/fmnist_cnn_torch.py
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn


def model():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(args.batch, 1, 28, 28)
    y = torch.randint(0, 10, (args.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()

    for _ in range(10):
        step()
    rates = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        rates.append(args.batch * args.steps / (time.perf_counter() - t0))
    print(json.dumps({"impl": "pytorch", "torch": torch.__version__, "threads": args.threads,
                      "batch": args.batch, "images_per_sec": statistics.median(rates)}))


if __name__ == "__main__":
    main()
