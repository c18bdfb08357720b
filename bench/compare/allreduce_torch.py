#!/usr/bin/env python3
"""PyTorch 1.13 torch.distributed Gloo all_reduce, in the rows of `tcv-bench allreduce`.

Starts --nproc processes on 127.0.0.1 (each with OMP_NUM_THREADS=1 unless set),
sweeps sizes like nccl-tests (-b, -e, -f), times --iters synchronous
all_reduce calls after --warmup ones behind a barrier, and prints from rank 0:
size(B) count type redop time(us) algbw busbw #wrong, then the average bus
bandwidth. --json prints one JSON object per row (and a summary line).

    GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \\
    /usr/bin/python3 bench/compare/allreduce_torch.py -b 1M -e 64M -f 4
"""
import argparse
import json
import os
import subprocess
import sys
import time

from common import free_port


def parse_bytes(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1].upper(), 1)
    return int(text[:-1] if mult != 1 else text) * mult


def worker(args):
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%s" % os.environ["MASTER_PORT"],
                            rank=rank, world_size=world)
    dtype = {"float": torch.float32, "double": torch.float64, "half": torch.float16,
             "bfloat16": torch.bfloat16}[args.datatype]
    esize = torch.tensor([], dtype=dtype).element_size()
    op = dist.ReduceOp.SUM
    if rank == 0 and not args.json:
        print("# torch %s gloo allreduce: %d rank(s), %s %s, iters %d, warmup %d, check %d\n#"
              % (torch.__version__, world, args.datatype, args.op, args.iters, args.warmup, args.check))
        print("# %12s %12s %9s %6s %11s %8s %8s %7s" % ("size", "count", "type", "redop", "time",
                                                       "algbw", "busbw", "#wrong"))
    busbws, total_wrong = [], 0
    nbytes = parse_bytes(args.minbytes)
    maxbytes = parse_bytes(args.maxbytes)
    while nbytes <= maxbytes:
        count = nbytes // esize
        t = torch.zeros(count, dtype=dtype)
        for _ in range(args.warmup):
            dist.all_reduce(t, op=op)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(t, op=op)
        sec = (time.perf_counter() - t0) / args.iters
        wrong = -1
        if args.check:
            i = torch.arange(count, dtype=torch.int64)
            t = ((rank + 1) * (i % 13 + 1)).to(dtype)
            dist.all_reduce(t, op=op)
            want = ((i % 13 + 1) * (world * (world + 1) // 2)).to(torch.float64)
            if args.op == "avg":
                t = t / world
                want = want / world
            wrong_t = torch.tensor([int(((t.double() - want).abs() > 1e-3 * want.abs()).sum())])
            dist.all_reduce(wrong_t)
            wrong = int(wrong_t)
            total_wrong += wrong
        algbw = nbytes / sec / 1e9
        busbw = algbw * 2 * (world - 1) / world
        busbws.append(busbw)
        if rank == 0:
            if args.json:
                print(json.dumps({"backend": "torch-gloo", "ranks": world, "size": nbytes,
                                  "count": count, "type": args.datatype, "redop": args.op,
                                  "time_us": sec * 1e6, "algbw": algbw, "busbw": busbw,
                                  "wrong": wrong}))
            else:
                print("  %12d %12d %9s %6s %11.1f %8.3f %8.3f %7s" % (
                    nbytes, count, args.datatype, args.op, sec * 1e6, algbw, busbw,
                    str(wrong) if args.check else "N/A"))
            sys.stdout.flush()
        nbytes *= args.stepfactor
    if rank == 0:
        avg = sum(busbws) / max(1, len(busbws))
        if args.json:
            print(json.dumps({"avg_busbw": avg, "wrong": total_wrong}))
        else:
            print("# Out of bounds values : %d %s\n# Avg bus bandwidth    : %.4f\n#"
                  % (total_wrong, "FAILED" if total_wrong else "OK", avg))
    dist.barrier()
    dist.destroy_process_group()
    return 1 if total_wrong else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("-b", "--minbytes", default="32M")
    p.add_argument("-e", "--maxbytes", default="32M")
    p.add_argument("-f", "--stepfactor", type=int, default=2)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup_iters", dest="warmup", type=int, default=5)
    p.add_argument("-c", "--check", type=int, default=1)
    p.add_argument("-d", "--datatype", default="float", choices=["float", "double", "half", "bfloat16"])
    p.add_argument("--op", default="sum", choices=["sum"])  # torch 1.13 Gloo has no AVG
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if "RANK" in os.environ:
        sys.exit(worker(args))
    port = str(free_port())
    procs = []
    for r in range(args.nproc):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.nproc), MASTER_PORT=port)
        env.setdefault("OMP_NUM_THREADS", "1")
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), *sys.argv[1:]],
                                      env=env, stdout=None if r == 0 else subprocess.DEVNULL))
    codes = [p.wait() for p in procs]
    sys.exit(max(codes))


if __name__ == "__main__":
    main()
