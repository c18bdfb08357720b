#!/usr/bin/env python3
"""Side by side: tcv's DistributedDataParallel vs PyTorch 1.13's, both over Gloo
on this machine: 2 processes x 1 thread, the Fashion-MNIST ResNet
(fmnist_resnet), the same per-rank batch, forward + backward (bucketed
all-reduce overlapping backward) + SGD.

Interleaves runs (tcv, torch, tcv, torch, ...) because these machines are noisy,
then prints the median global images/s of each, the ratio, and tcv's reducer
stats (buckets, comm time per step, the fraction hidden behind backward).

    /usr/bin/python3 bench/compare/ddp.py [--build build] [--rounds 5] [--nproc 2]
"""
import argparse
import os
import statistics
import subprocess
import sys

from common import TORCH_ENV, free_port, last_json

HERE = os.path.dirname(os.path.abspath(__file__))


def run_tcv(build, nproc, batch, steps):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [os.path.join(build, "apps", "tcv-run"), "--nproc-per-node", str(nproc),
           "--quiet-others", "--", os.path.join(build, "bench", "tcv-ddp-bench"),
           "--model", "fmnist_resnet", "--batch", str(batch), "--steps", str(steps)]
    return last_json(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)


def run_torch(nproc, batch, steps):
    port = free_port()
    procs = []
    for r in range(nproc):
        env = dict(os.environ, **TORCH_ENV, RANK=str(r), WORLD_SIZE=str(nproc),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(["/usr/bin/python3", os.path.join(HERE, "ddp_torch.py"),
                                       "--batch", str(batch), "--steps", str(steps)],
                                      env=env, stdout=subprocess.PIPE, text=True))
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"ddp_torch.py failed: {[p.returncode for p in procs]}")
    return last_json(outs[0])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    tcv, torch, stats = [], [], []
    for r in range(args.rounds):
        t = run_tcv(args.build, args.nproc, args.batch, args.steps)
        tcv.append(t["images_per_sec"])
        stats.append(t)
        torch.append(run_torch(args.nproc, args.batch, args.steps)["images_per_sec"])
        print(f"round {r + 1}: tcv {tcv[-1]:.0f} img/s, pytorch {torch[-1]:.0f} img/s", file=sys.stderr)
    mt, mp = statistics.median(tcv), statistics.median(torch)
    med = lambda k: statistics.median(s[k] for s in stats)
    print(f"fmnist_resnet DDP train step, gloo, {args.nproc} processes x 1 thread, batch {args.batch} "
          f"per rank, median of {args.rounds} interleaved rounds")
    print(f"  tcv      {mt:8.0f} images/s (global)")
    print(f"  pytorch  {mp:8.0f} images/s (global)")
    print(f"  ratio    {mt / mp:8.2f}x")
    print(f"  tcv reducer: {stats[0]['buckets']} buckets, backward {med('backward_ms'):.1f} ms, "
          f"all-reduce {med('comm_ms'):.1f} ms/step of which {med('hidden_ms'):.1f} ms hidden behind "
          f"backward ({100 * med('hidden_fraction'):.0f}%), end-of-backward wait {med('wait_ms'):.1f} ms")


if __name__ == "__main__":
    main()
