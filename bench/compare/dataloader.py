#!/usr/bin/env python3
"""Side by side: tcv's DataLoader vs PyTorch's (with PIL), decode + augment on JPEGs.

Generates the JPEGs once with `tcv-bench data --dir DIR` (N images, S x S, two class
directories), then interleaves rounds of `tcv-bench data` and dataloader_torch.py
over the same files and the same pipeline (RandomResizedCrop 224, horizontal flip,
to float, normalize) and prints the median images/s per worker count and the ratio.
Both resample alike: tcv's RandomResizedCrop uses PIL's antialiased bilinear filter
(data::Antialias::on), and its u8 output equals PIL's crop + resize bit for bit.
tcv gets OMP_NUM_THREADS=--threads; PyTorch's main process gets --torch-threads
(1 by default, as its worker processes; more made workers=0 slower).

    /usr/bin/python3 bench/compare/dataloader.py [--build build] [--rounds 3] [--workers 0,1,2]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from common import TORCH_ENV, last_json

HERE = os.path.dirname(os.path.abspath(__file__))


def run_tcv(args, root):
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    cmd = [os.path.join(args.build, "apps", "tcv-bench"), "data", "--dir", root, "--images",
           str(args.images), "--size", str(args.size), "--batch", str(args.batch), "--workers",
           args.workers, "--epochs", str(args.epochs), "--json"]
    return last_json(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)


def run_torch(args, root):
    env = dict(os.environ, **TORCH_ENV)
    cmd = ["/usr/bin/python3", os.path.join(HERE, "dataloader_torch.py"), "--dir", root, "--batch",
           str(args.batch), "--workers", args.workers, "--threads", str(args.torch_threads),
           "--epochs", str(args.epochs)]
    return last_json(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)


def rates(result):
    return {r["workers"]: r["images_per_sec"] for r in result["runs"]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--images", type=int, default=500)
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--workers", default="0,1,2")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--torch-threads", type=int, default=1,
                   help="PyTorch's intra-op threads in the main process (its workers use 1)")
    p.add_argument("--epochs", type=int, default=2, help="per worker count, the best counts")
    args = p.parse_args()
    root = tempfile.mkdtemp(prefix="tcv-dataloader-")
    try:
        run_tcv(argparse.Namespace(**{**vars(args), "workers": "0"}), root)  # writes the JPEGs
        tcv, torch = [], []
        for r in range(args.rounds):
            tcv.append(rates(run_tcv(args, root)))
            torch.append(rates(run_torch(args, root)))
            print(f"round {r + 1}: tcv {tcv[-1]}, pytorch {torch[-1]}", file=sys.stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    workers = [int(w) for w in args.workers.split(",")]
    print(f"DataLoader, {args.images} JPEGs {args.size}x{args.size} -> RandomResizedCrop 224 + flip "
          f"+ normalize, batch {args.batch}, tcv OMP threads {args.threads}, torch main-process "
          f"threads {args.torch_threads}, median of {args.rounds} interleaved rounds (images/s)")
    print(f"  {'workers':>7s} {'tcv':>10s} {'pytorch':>10s} {'ratio':>7s}")
    summary = []
    for w in workers:
        mt = statistics.median(t[w] for t in tcv)
        mp = statistics.median(t[w] for t in torch)
        print(f"  {w:7d} {mt:10.1f} {mp:10.1f} {mt / mp:6.2f}x")
        summary.append({"workers": w, "tcv_images_per_sec": mt, "torch_images_per_sec": mp,
                        "ratio": mt / mp})
    print(json.dumps({"images": args.images, "size": args.size, "batch": args.batch,
                      "rounds": args.rounds, "runs": summary}))


if __name__ == "__main__":
    main()
