#!/usr/bin/env python3
"""PyTorch reference timings for bench/bench_pointwise.cpp (same shapes, same
forward + backward work).

Run with the system Python that has torch 1.13, two threads, glibc malloc tuned
like tcv's caching allocator:

  GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \
    /usr/bin/python3 bench/compare/pointwise_torch.py [--runs 5] [--threads 2]

Prints one line per case with the median ms over several runs.
"""
import argparse
import statistics

import torch
import torch.nn.functional as F

from conv_torch import time_it

ACTIVATION = (48, 64, 32, 32)


def unary_case(name):
    x = torch.randn(*ACTIVATION)
    if name == "log":
        x = x.abs() + 0.01
    x.requires_grad_(True)
    dy = torch.randn(*ACTIVATION)
    fn = getattr(torch, name)

    def step():
        y = fn(x)
        x.grad = None
        y.backward(dy)

    return step


def softmax_case(n, c, h, w, log):
    shape = (n, c) if h * w == 1 else (n, c, h, w)
    x = torch.randn(*shape, requires_grad=True)
    dy = torch.randn(*shape)
    fn = F.log_softmax if log else F.softmax

    def step():
        y = fn(x, 1)
        x.grad = None
        y.backward(dy)

    return step


def cross_entropy_case(n, c, h, w, smooth, ignored_pct=0):
    dense = h * w > 1
    x = torch.randn(*((n, c, h, w) if dense else (n, c)), requires_grad=True)
    t = torch.randint(0, c, (n, h, w) if dense else (n,))
    if ignored_pct:
        t[torch.rand(t.shape) < ignored_pct / 100.0] = 255

    def step():
        loss = F.cross_entropy(x, t, ignore_index=255, label_smoothing=smooth / 100.0)
        x.grad = None
        loss.backward()

    return step


def bce_case():
    shape = (32, 8732, 21)
    x = torch.randn(*shape, requires_grad=True)
    t = (torch.rand(*shape) > 0.9).float()

    def step():
        loss = F.binary_cross_entropy_with_logits(x, t)
        x.grad = None
        loss.backward()

    return step


CASES = [
    *[(f"unary {n} fwd+bwd {ACTIVATION}", unary_case, (n,)) for n in ("exp", "log", "sigmoid", "tanh")],
    ("softmax fwd+bwd (256, 1000)", softmax_case, (256, 1000, 1, 1, False)),
    ("log_softmax fwd+bwd (256, 1000)", softmax_case, (256, 1000, 1, 1, True)),
    ("log_softmax fwd+bwd (8, 21, 128, 128)", softmax_case, (8, 21, 128, 128, True)),
    ("cross_entropy fwd+bwd (256, 1000)", cross_entropy_case, (256, 1000, 1, 1, 0)),
    ("cross_entropy smooth 0.1 fwd+bwd (256, 1000)", cross_entropy_case, (256, 1000, 1, 1, 10)),
    ("cross_entropy fwd+bwd (8, 21, 128, 128)", cross_entropy_case, (8, 21, 128, 128, 0)),
    ("cross_entropy fwd+bwd (4, 21, 256, 256), 5% ignored", cross_entropy_case,
     (4, 21, 256, 256, 0, 5)),
    ("bce_with_logits fwd+bwd (32, 8732, 21)", bce_case, ()),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--filter", default="", help="run only the cases whose label contains this")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    for label, make, params in CASES:
        if args.filter not in label:
            continue
        step = make(*params)
        runs = [time_it(step) * 1e3 for _ in range(args.runs)]
        print(f"{label}: median {statistics.median(runs):.3f} ms")


if __name__ == "__main__":
    main()
