#!/usr/bin/env python3
"""Side by side: tcv vs PyTorch 1.13 training the Fashion-MNIST small CNN on the CPU.

Interleaves runs (tcv, torch, tcv, torch, ...) because these machines are noisy,
then prints the median images/s of each and the ratio. Both use 2 threads;
PyTorch runs with its fastest malloc settings.

    /usr/bin/python3 bench/compare/fmnist_cnn.py [--build build] [--rounds 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

from common import TORCH_ENV

HERE = os.path.dirname(os.path.abspath(__file__))


def run_tcv(build, threads, bench):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([os.path.join(build, "bench", "tcv-gbench"), f"--benchmark_filter=^{bench}/",
                          "--benchmark_min_time=3", "--benchmark_format=json"],
                         env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["benchmarks"][0]["images_per_sec"]


def run_torch(threads, script):
    env = dict(os.environ, **TORCH_ENV)
    out = subprocess.run(["/usr/bin/python3", os.path.join(HERE, script), "--threads", str(threads),
                          "--repeats", "3"], env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["images_per_sec"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    tcv, torch = [], []
    for r in range(args.rounds):
        tcv.append(run_tcv(args.build, args.threads, "FmnistCnnTrainStep"))
        torch.append(run_torch(args.threads, "fmnist_cnn_torch.py"))
        print(f"round {r + 1}: tcv {tcv[-1]:.0f} img/s, pytorch {torch[-1]:.0f} img/s", file=sys.stderr)
    mt, mp = statistics.median(tcv), statistics.median(torch)
    print(f"fmnist_cnn train step, batch 64, {args.threads} threads, median of {args.rounds} interleaved rounds")
    print(f"  tcv      {mt:8.0f} images/s")
    print(f"  pytorch  {mp:8.0f} images/s")
    print(f"  ratio    {mt / mp:8.2f}x")


if __name__ == "__main__":
    main()
