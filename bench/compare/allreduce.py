#!/usr/bin/env python3
"""Side by side: tcv's Gloo all-reduce vs PyTorch 1.13's, 2 processes on this host.

Runs `tcv-run --nproc-per-node 2 -- tcv-bench allreduce --backend gloo -b 1M -e 64M -f 4`
(two ranks on one machine: tcv's shared-memory path), the same with TCV_GLOO_SHM=0
(tcv over TCP, as between machines) and bench/compare/allreduce_torch.py with the same
sweep, interleaved (A B C A B C ...) for --rounds rounds, every process with
OMP_NUM_THREADS=1, then prints the median bus bandwidth per size and the ratios to
torch (16 MiB and 64 MiB are the headline sizes). tcv runs with
TCV_DISTRIBUTED_DEBUG=OFF, as PyTorch runs by default (TORCH_DISTRIBUTED_DEBUG=OFF):
otherwise the first 64 collectives, every row up to 4 MiB here, also compare
fingerprints over TCP before moving data.

    /usr/bin/python3 bench/compare/allreduce.py [--build build] [--rounds 3]
"""
import argparse
import json
import os
import statistics
import subprocess

from common import TORCH_ENV

HERE = os.path.dirname(os.path.abspath(__file__))


def rows(out):
    res = {}
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            j = json.loads(line)
            if "size" in j:
                res[j["size"]] = j
    return res


def sweep(args):
    return ["-b", args.minbytes, "-e", args.maxbytes, "-f", str(args.stepfactor), "-n",
            str(args.iters), "-w", str(args.warmup), "-c", "0", "--json"]


def run_tcv(args, shm=True):
    env = dict(os.environ, OMP_NUM_THREADS="1", TCV_GLOO_SHM="1" if shm else "0",
               TCV_DISTRIBUTED_DEBUG="OFF")
    cmd = [os.path.join(args.build, "apps", "tcv-run"), "--nproc-per-node", "2", "--",
           os.path.join(args.build, "apps", "tcv-bench"), "allreduce", "--backend", "gloo",
           *sweep(args)]
    return rows(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)


def run_torch(args):
    env = dict(os.environ, OMP_NUM_THREADS="1", **TORCH_ENV)
    cmd = ["/usr/bin/python3", os.path.join(HERE, "allreduce_torch.py"), "--nproc", "2",
           *sweep(args)]
    return rows(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("-b", "--minbytes", default="1M")
    p.add_argument("-e", "--maxbytes", default="64M")
    p.add_argument("-f", "--stepfactor", type=int, default=4)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup", type=int, default=5)
    args = p.parse_args()
    ours, tcp, theirs = {}, {}, {}
    for r in range(args.rounds):
        for name, fn, acc in (("tcv", run_tcv, ours), ("tcp", lambda a: run_tcv(a, shm=False), tcp),
                              ("torch", run_torch, theirs)):
            res = fn(args)
            for size, row in res.items():
                acc.setdefault(size, []).append(row["busbw"])
            print("round %d %-5s " % (r + 1, name) +
                  " ".join("%dMiB:%.3f" % (s >> 20, res[s]["busbw"]) for s in sorted(res)), flush=True)
    print("\n# all-reduce busbw (GB/s), 2 ranks, Gloo over 127.0.0.1, float sum, median of %d"
          % args.rounds)
    print("%12s %10s %10s %10s %8s %8s" % ("size(B)", "tcv", "tcv-tcp", "torch", "ratio",
                                            "tcp/torch"))
    for size in sorted(ours):
        a = statistics.median(ours[size])
        t = statistics.median(tcp.get(size, [float("nan")]))
        b = statistics.median(theirs.get(size, [float("nan")]))
        mark = "  <-" if size in (16 << 20, 64 << 20) else ""
        print("%12d %10.3f %10.3f %10.3f %8.2f %8.2f%s" % (size, a, t, b, a / b if b else float("nan"),
                                                       t / b if b else float("nan"), mark))


if __name__ == "__main__":
    main()
