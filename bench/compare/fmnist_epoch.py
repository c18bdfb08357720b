#!/usr/bin/env python3
"""Side by side: a Fashion-MNIST epoch with `tcv-train` (configs/cls/fmnist_cnn.toml)
against the same epoch written in PyTorch 1.13 (fmnist_epoch_torch.py).

Each run starts a fresh process, reads Debian's gzip IDX files, trains --epochs
epochs and evaluates the test set; the figure is the process's wall time, as a
user waits for it (tcv's checkpoint writes included). Runs are interleaved
(tcv, torch, tcv, torch, ...) because these machines are noisy; prints the
medians, their ratio and each side's test top-1. Both use 2 threads and one
loader worker; PyTorch runs with its fastest malloc settings.

    /usr/bin/python3 bench/compare/fmnist_epoch.py [--build build] [--rounds 5]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from common import HERE, TORCH_ENV, last_json

ROOT = os.path.dirname(os.path.dirname(HERE))


def run_tcv(args, out):
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    t0 = time.perf_counter()
    log = subprocess.run([os.path.join(args.build, "apps", "tcv-train"), "--config",
                          os.path.join(ROOT, "configs", "cls", "fmnist_cnn.toml"), "--out", out,
                          "--set", f"solver.max_epoch={args.epochs}", "--set", "data.workers=1"],
                         env=env, check=True, capture_output=True, text=True).stdout
    wall = time.perf_counter() - t0
    done = [l for l in log.splitlines() if l.startswith("done:")][-1]
    return wall, done


def run_torch(args):
    env = dict(os.environ, **TORCH_ENV)
    t0 = time.perf_counter()
    row = last_json(subprocess.run(["/usr/bin/python3", os.path.join(HERE, "fmnist_epoch_torch.py"),
                                    "--threads", str(args.threads), "--epochs", str(args.epochs)],
                                   env=env, check=True, capture_output=True, text=True).stdout)
    return time.perf_counter() - t0, row


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--epochs", type=int, default=1)
    args = p.parse_args()
    tcv, torch = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            wall, done = run_tcv(args, os.path.join(tmp, f"run{r}"))
            tcv.append(wall)
            twall, row = run_torch(args)
            torch.append(twall)
            print(f"round {r + 1}: tcv {wall:.2f} s ({done}); pytorch {twall:.2f} s "
                  f"(train {row['train_s']:.2f} s, top-1 {100 * row['top1']:.2f} %)", file=sys.stderr)
    mt, mp = statistics.median(tcv), statistics.median(torch)
    print(f"fmnist_cnn, {args.epochs} epoch(s) + test, {args.threads} threads, 1 loader worker, "
          f"median wall time of {args.rounds} interleaved rounds")
    print(f"  tcv      {mt:7.2f} s")
    print(f"  pytorch  {mp:7.2f} s")
    print(f"  ratio    {mp / mt:7.2f}x")


if __name__ == "__main__":
    main()
