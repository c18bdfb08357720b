#!/usr/bin/env python3
"""Data parallelism against one process, on the numbers: tcv-train on
Fashion-MNIST's fmnist_cnn for --steps steps, once as 2 ranks x 32 images
(tcv-run, network.distributed = true) and once as 1 process x 64, from the same
seed; the two runs see the same global batches, so with exact arithmetic their
weights would be equal. Prints, per CPU convolution algorithm
(train.conv_algo), the largest over the weight tensors of
max|w_ddp - w_single| / max|w_single| after the last step, and the largest
max|w_ddp - w_single|.

    /usr/bin/python3 bench/compare/ddp_split.py [--build build] [--steps 60]
        [--algos auto,direct,winograd]
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np


def read_safetensors(path):
    """{name: float64 array} of a safetensors file's floating tensors."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"F32": np.float32, "F64": np.float64}
    out = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] not in dtypes:
            continue
        lo, hi = meta["data_offsets"]
        out[name] = np.frombuffer(data[lo:hi], dtype=dtypes[meta["dtype"]]).astype(np.float64)
    return out


def train(build, out, nproc, batch, steps, algo):
    sets = ["seed=0", "device=\"cpu\"", "data.workers=0", f"train.batch_size={batch}",
            f"solver.max_iters={steps}", "solver.display_iter=1000", "val.max_images=100",
            f"network.distributed={'true' if nproc > 1 else 'false'}",
            f"train.conv_algo=\"{algo}\""]
    cmd = [os.path.join(build, "apps", "tcv-train"), "--config",
           os.path.join(os.path.dirname(__file__), "..", "..", "configs", "cls", "fmnist_cnn.toml"),
           "--out", out]
    for s in sets:
        cmd += ["--set", s]
    if nproc > 1:
        cmd = [os.path.join(build, "apps", "tcv-run"), "--nproc-per-node", str(nproc),
               "--quiet-others", "--"] + cmd
    env = dict(os.environ, OMP_NUM_THREADS="1" if nproc > 1 else "2")
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return read_safetensors(os.path.join(out, "checkpoints", "latest.safetensors"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--algos", default="auto,direct,winograd")
    args = ap.parse_args()
    rows = {}
    for algo in args.algos.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            ddp = train(args.build, os.path.join(tmp, "ddp"), 2, 32, args.steps, algo)
            one = train(args.build, os.path.join(tmp, "one"), 1, 64, args.steps, algo)
        worst, where, worst_abs = 0.0, "", 0.0
        for name, w in one.items():
            if name.startswith("optim.") or not name.endswith(("weight", "bias")):
                continue
            diff = np.max(np.abs(ddp[name] - w))
            worst_abs = max(worst_abs, diff)
            d = diff / max(np.max(np.abs(w)), 1e-30)
            if d > worst:
                worst, where = d, name
        rows[algo] = {"max_rel_diff": worst, "at": where, "max_abs_diff": worst_abs}
        print(f"  {algo:9s} 2x32 vs 1x64 after {args.steps} steps: {worst:.2e} relative to the "
              f"tensor's largest weight (at {where}), {worst_abs:.2e} absolute", flush=True)
    print(json.dumps({"steps": args.steps, "algos": rows}))


if __name__ == "__main__":
    sys.exit(main())
