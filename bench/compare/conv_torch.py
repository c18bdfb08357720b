#!/usr/bin/env python3
"""PyTorch reference timings for bench/bench_conv.cpp (same shapes, same FLOP count).

Run with the system Python that has torch 1.13, two threads, and glibc malloc
tuned like tcv's caching allocator so that neither side pays for mmap/munmap:

  GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \
    /usr/bin/python3 bench/compare/conv_torch.py [--runs 5] [--threads 2]

Prints one line per case with the median GFLOP/s (conv) or ms (pool, batch norm)
over several runs.
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

CONV_SHAPES = [
    # (N, C, H, W, K, R, S, pad, dilation)
    (32, 64, 32, 32, 64, 3, 3, 1, 1),
    (16, 256, 14, 14, 256, 3, 3, 1, 1),
    # The segmentation backbones at output stride 8 (batch 4 of 256x256): layer3
    # (dilation 2), layer4 (dilation 4), an ASPP branch (dilation 12), each beside
    # the undilated layer of the same FLOPs, and PSPNet's 4096-channel head.
    (4, 256, 32, 32, 256, 3, 3, 1, 1),
    (4, 256, 32, 32, 256, 3, 3, 2, 2),
    (4, 512, 32, 32, 512, 3, 3, 1, 1),
    (4, 512, 32, 32, 512, 3, 3, 4, 4),
    (4, 2048, 32, 32, 256, 3, 3, 1, 1),
    (4, 2048, 32, 32, 256, 3, 3, 12, 12),
    (4, 4096, 32, 32, 512, 3, 3, 1, 1),
]


def time_it(fn, min_time=0.5, warmup=2):
    for _ in range(warmup):
        fn()
    iters, start = 0, time.perf_counter()
    while True:
        fn()
        iters += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / iters


def conv_case(n, c, h, w, k, r, s, pad, dil=1):
    x = torch.randn(n, c, h, w, requires_grad=True)
    wt = torch.randn(k, c, r, s, requires_grad=True) * 0.05
    wt = wt.detach().requires_grad_(True)
    b = torch.zeros(k, requires_grad=True)
    oh = h + 2 * pad - dil * (r - 1)
    ow = w + 2 * pad - dil * (s - 1)
    dy = torch.randn(n, k, oh, ow)

    def step():
        y = F.conv2d(x, wt, b, padding=pad, dilation=dil)
        x.grad = wt.grad = b.grad = None
        y.backward(dy)

    flops = 3 * 2 * n * k * c * r * s * oh * ow
    return flops / time_it(step) / 1e9


def maxpool_case():
    x = torch.randn(64, 32, 28, 28, requires_grad=True)
    dy = torch.randn(64, 32, 14, 14)

    def step():
        y = F.max_pool2d(x, 2, 2)
        x.grad = None
        y.backward(dy)

    return time_it(step) * 1e3


def batchnorm_case():
    x = torch.randn(64, 32, 28, 28, requires_grad=True)
    g = torch.ones(32, requires_grad=True)
    b = torch.zeros(32, requires_grad=True)
    rm, rv = torch.zeros(32), torch.ones(32)
    dy = torch.randn(64, 32, 28, 28)

    def step():
        y = F.batch_norm(x, rm, rv, g, b, training=True, momentum=0.1, eps=1e-5)
        x.grad = g.grad = b.grad = None
        y.backward(dy)

    return time_it(step) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", choices=["conv", "pool", "bn", "all"], default="all")
    ap.add_argument("--batch", type=int, default=0, help="only the conv shapes with this N")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, mkldnn {torch.backends.mkldnn.is_available()}")
    if args.only in ("conv", "all"):
        for shape in CONV_SHAPES:
            if args.batch and shape[0] != args.batch:
                continue
            runs = [conv_case(*shape) for _ in range(args.runs)]
            n, c, h, w, k, r, s, pad, dil = shape
            print(f"conv2d fwd+bwd N{n} C{c} {h}x{w} K{k} {r}x{s} pad{pad} dil{dil}: "
                  f"median {statistics.median(runs):.1f} GFLOP/s (runs: {', '.join(f'{v:.1f}' for v in runs)})")
    if args.only in ("pool", "all"):
        runs = [maxpool_case() for _ in range(args.runs)]
        print(f"max_pool2d 2x2/2 fwd+bwd (64, 32, 28, 28): median {statistics.median(runs):.3f} ms")
    if args.only in ("bn", "all"):
        runs = [batchnorm_case() for _ in range(args.runs)]
        print(f"batch_norm train fwd+bwd (64, 32, 28, 28): median {statistics.median(runs):.3f} ms")


if __name__ == "__main__":
    main()
