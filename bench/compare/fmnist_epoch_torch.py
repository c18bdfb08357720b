#!/usr/bin/env python3
"""PyTorch side of the Fashion-MNIST epoch comparison: what `tcv-train --config
configs/cls/fmnist_cnn.toml` does in one epoch, written as a PyTorch user would.

Reads Debian's gzip IDX files, normalizes each image in a DataLoader worker
(to float / 255, then (x - 0.2860) / 0.3530, as ToTensor + Normalize), trains
the small CNN (conv32-conv64-fc128-fc10) with batch 64 (shuffled, last partial
batch dropped), SGD with Nesterov momentum 0.9 and weight decay 5e-4, lr 0.05
with 200 warm-up iterations and a per-iteration cosine over the epochs, then
evaluates the 10,000 test images in batches of 500. Prints one JSON line: the
wall time from start to end (reading the files included) and the test top-1.

    /usr/bin/python3 bench/compare/fmnist_epoch_torch.py [--threads 2] [--epochs 1]
"""
import argparse
import gzip
import json
import math
import os
import time

T0 = time.perf_counter()

import torch  # noqa: E402  (its import is part of what a user waits for)
import torch.nn as nn  # noqa: E402

from fmnist_cnn_torch import model  # noqa: E402  (the same network as the step comparison)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


class Idx(torch.utils.data.Dataset):
    def __init__(self, images, labels):
        self.images, self.labels = images, labels.long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = self.images[i].unsqueeze(0).float().div_(255.0)
        return x.sub_(0.2860).div_(0.3530), self.labels[i]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--dir", default="/usr/share/datasets/fashion-mnist")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    d = args.dir
    train = Idx(read_idx(os.path.join(d, "train-images-idx3-ubyte.gz")),
                read_idx(os.path.join(d, "train-labels-idx1-ubyte.gz")))
    test = Idx(read_idx(os.path.join(d, "t10k-images-idx3-ubyte.gz")),
               read_idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz")))
    train_loader = torch.utils.data.DataLoader(train, batch_size=64, shuffle=True, drop_last=True,
                                               num_workers=args.workers)
    test_loader = torch.utils.data.DataLoader(test, batch_size=500, num_workers=args.workers)
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    total = args.epochs * len(train_loader)
    warm = 200

    def lr_at(it):
        if it < warm:
            return (it + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * it / total))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    loss_fn = nn.CrossEntropyLoss()
    t_train = time.perf_counter()
    for _ in range(args.epochs):
        net.train()
        for x, y in train_loader:
            opt.zero_grad(set_to_none=True)
            loss_fn(net(x), y).backward()
            opt.step()
            sched.step()
    train_s = time.perf_counter() - t_train
    net.eval()
    correct = 0
    with torch.no_grad():
        for x, y in test_loader:
            correct += (net(x).argmax(1) == y).sum().item()
    print(json.dumps({"impl": "pytorch", "torch": torch.__version__, "threads": args.threads,
                      "epochs": args.epochs, "train_s": train_s,
                      "wall_s": time.perf_counter() - T0, "top1": correct / len(test)}))


if __name__ == "__main__":
    main()
