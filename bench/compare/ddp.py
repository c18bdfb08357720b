#!/usr/bin/env python3
"""Side by side: tcv's DistributedDataParallel vs PyTorch 1.13's, both over Gloo
on this machine: 2 processes x 1 thread, the Fashion-MNIST ResNet
(fmnist_resnet), the same per-rank batch, forward + backward (bucketed
all-reduce overlapping backward) + SGD.

Interleaves runs (tcv, torch, tcv, torch, ...) because these machines are noisy,
then prints the median global images/s of each, the ratio, and tcv's reducer
stats (buckets, all-reduce time per step, the part hidden behind backward and
the part exposed after it: hidden % = comm overlapped with backward / all comm,
both as the union of each bucket's [launch, finish] on rank 0; and the same in
each step on the rank that ended backward last, which waits for no peer). --plan cap
runs PyTorch's bucket rule instead of tcv's timed plan; --plan both interleaves
the two with torch. --timeline DIR keeps one step's timeline per tcv run.

    /usr/bin/python3 bench/compare/ddp.py [--build build] [--rounds 5] [--nproc 2]
"""
import argparse
import os
import statistics
import subprocess
import sys

from common import TORCH_ENV, free_port, last_json

HERE = os.path.dirname(os.path.abspath(__file__))


def run_tcv(build, nproc, batch, steps, plan="timed", timeline=None):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [os.path.join(build, "apps", "tcv-run"), "--nproc-per-node", str(nproc),
           "--quiet-others", "--", os.path.join(build, "bench", "tcv-ddp-bench"),
           "--model", "fmnist_resnet", "--batch", str(batch), "--steps", str(steps),
           "--bucket-plan", plan]
    if timeline:
        cmd += ["--timeline", timeline]
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
    p.add_argument("--plan", default="timed", choices=["timed", "cap", "both"])
    p.add_argument("--timeline", default=None, help="directory for one timeline per tcv run")
    args = p.parse_args()
    plans = ["timed", "cap"] if args.plan == "both" else [args.plan]
    if args.timeline:
        os.makedirs(args.timeline, exist_ok=True)
    tcv = {pl: [] for pl in plans}
    stats = {pl: [] for pl in plans}
    torch = []
    for r in range(args.rounds):
        line = []
        for pl in plans:
            tl = os.path.join(args.timeline, "%s-%d.json" % (pl, r + 1)) if args.timeline else None
            t = run_tcv(args.build, args.nproc, args.batch, args.steps, pl, tl)
            tcv[pl].append(t["images_per_sec"])
            stats[pl].append(t)
            line.append("tcv(%s) %.0f img/s %d buckets %.0f%% hidden %.1f ms exposed (last rank %.0f%%, "
                        "%.1f ms)" % (pl, t["images_per_sec"], t["buckets"], 100 * t["hidden_fraction"],
                                      t["exposed_ms"], 100 * t["last_rank_hidden_fraction"],
                                      t["last_rank_exposed_ms"]))
        torch.append(run_torch(args.nproc, args.batch, args.steps)["images_per_sec"])
        print("round %d: %s, pytorch %.0f img/s" % (r + 1, ", ".join(line), torch[-1]), file=sys.stderr)
    mp = statistics.median(torch)
    print(f"fmnist_resnet DDP train step, gloo, {args.nproc} processes x 1 thread, batch {args.batch} "
          f"per rank, median of {args.rounds} interleaved rounds (load {os.getloadavg()[0]:.2f} at the end)")
    for pl in plans:
        mt = statistics.median(tcv[pl])
        med = lambda k: statistics.median(s[k] for s in stats[pl])
        print(f"  tcv ({pl:5s}) {mt:8.0f} images/s (global)  ratio {mt / mp:5.2f}x")
        print(f"      reducer: {med('buckets'):.0f} buckets, backward {med('backward_ms'):.1f} ms, "
              f"all-reduce {med('comm_ms'):.1f} ms/step: {med('hidden_ms'):.1f} ms hidden behind backward "
              f"({100 * med('hidden_fraction'):.0f}%), {med('exposed_ms'):.1f} ms exposed after it (rank 0); "
              f"on the rank that ended backward last {100 * med('last_rank_hidden_fraction'):.0f}% hidden, "
              f"{med('last_rank_exposed_ms'):.1f} ms exposed")
    print(f"  pytorch       {mp:8.0f} images/s (global)")


if __name__ == "__main__":
    main()
