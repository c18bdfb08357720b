#!/usr/bin/env python3
"""Side by side: tcv's DDP communication hooks vs PyTorch 1.13's, 2 processes x
1 thread over Gloo on this machine.

1. Bytes on the wire per step with each hook (none, bf16, fp16, powersgd at
   rank --powersgd-rank) on fmnist_resnet and ResNet-50 (1000 classes,
   25,557,032 parameters): tcv's from tcv-ddp-bench (the process group's
   counter), PyTorch's from counting what its hooks hand to dist.all_reduce
   (comm_hooks_torch.py --mode bytes).
2. Accuracy: configs/cls/fmnist_resnet.toml for --epochs epochs (cosine over
   those epochs) under tcv-run --nproc-per-node 2 with network.distributed =
   true and each hook, for each --seeds; PyTorch's DDP with its hooks on the
   same model and recipe (comm_hooks_torch.py --mode train) where it runs.
   PowerSGD starts after --powersgd-start iterations (the 200-iteration
   warm-up).

    /usr/bin/python3 bench/compare/comm_hooks.py [--build build] [--epochs 2]
        [--seeds 0,1] [--hooks none,bf16,fp16,powersgd] [--skip-bytes]
        [--skip-train] [--skip-torch]

Prints the tables (markdown) at the end; every run's JSON on stderr as it ends.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from common import TORCH_ENV, free_port, last_json

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def log(obj):
    print(json.dumps(obj), file=sys.stderr, flush=True)


def tcv_bytes(build, model, hook, rank):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    args = ["--model", model, "--steps", "1", "--warmup", "3", "--repeats", "1",
            "--comm-hook", hook, "--powersgd-rank", str(rank), "--powersgd-start", "2"]
    if model == "resnet50":
        args += ["--channels", "3", "--classes", "1000", "--image-size", "32", "--batch", "2"]
    else:
        args += ["--batch", "32"]
    cmd = [os.path.join(build, "apps", "tcv-run"), "--nproc-per-node", "2", "--quiet-others",
           "--", os.path.join(build, "bench", "tcv-ddp-bench")] + args
    return last_json(subprocess.run(cmd, env=env, check=True, capture_output=True,
                                    text=True).stdout)


def torch_ranks(args, timeout):
    """Runs comm_hooks_torch.py on 2 ranks; rank 0's output (and whether both exited 0)."""
    port = free_port()
    procs = []
    for r in range(2):
        env = dict(os.environ, **TORCH_ENV, RANK=str(r), WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(
            ["/usr/bin/python3", os.path.join(HERE, "comm_hooks_torch.py")] + args, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=timeout))
        except subprocess.TimeoutExpired:
            p.kill()
            outs.append(p.communicate())
    ok = all(p.returncode == 0 for p in procs)
    err = ""
    if not ok:
        lines = [l for o in outs for l in o[1].splitlines()
                 if "Error" in l or "error" in l or "what()" in l or "enforce" in l]
        err = lines[-1].strip() if lines else f"exit {[p.returncode for p in procs]}"
    return outs[0][0], ok, err


def torch_bytes(model, hook, rank):
    args = ["--mode", "bytes", "--model", model, "--hook", hook, "--rank", str(rank),
            "--start-iter", "2"] + (["--batch", "2"] if model == "resnet50" else ["--batch", "32"])
    out, ok, err = torch_ranks(args, 900)
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    res = {"hook": hook, "model": model, "ok": ok, "error": err}
    for r in rows:
        res.update(r)
    return res


def tcv_train(build, hook, seed, epochs, rank, start):
    out = tempfile.mkdtemp(prefix=f"tcv_hooks_{hook}_{seed}_")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [os.path.join(build, "apps", "tcv-run"), "--nproc-per-node", "2", "--quiet-others",
           "--", os.path.join(build, "apps", "tcv-train"),
           "--config", os.path.join(ROOT, "configs", "cls", "fmnist_resnet.toml"),
           "--out", out, "--set", "network.distributed=true",
           "--set", f"solver.max_epoch={epochs}", "--set", f"seed={seed}",
           "--set", f'network.comm_hook="{hook}"',
           "--set", f"network.powersgd.rank={rank}",
           "--set", f"network.powersgd.start_iter={start}"]
    run = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    rows = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
    val = [r for r in rows if r.get("split") == "val"]
    summary = [l for l in run.stdout.splitlines() + run.stderr.splitlines() if "ddp:" in l]
    return {"impl": "tcv", "hook": hook, "seed": seed, "epochs": epochs,
            "top1": val[-1]["top1"], "top1_per_epoch": [r["top1"] for r in val],
            "seconds": round(val[-1]["time"], 1), "ddp": summary[-1] if summary else "",
            "out": out}


def torch_train(hook, seed, epochs, rank, start):
    args = ["--mode", "train", "--hook", hook, "--seed", str(seed), "--epochs", str(epochs),
            "--rank", str(rank), "--start-iter", str(start)]
    out, ok, err = torch_ranks(args, 3600 * epochs)
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    res = {"impl": "pytorch", "hook": hook, "seed": seed, "epochs": epochs, "ok": ok,
           "error": err}
    if rows:
        res.update(rows[-1])
    return res


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--hooks", default="none,bf16,fp16,powersgd")
    p.add_argument("--powersgd-rank", type=int, default=4)
    p.add_argument("--powersgd-start", type=int, default=200)
    p.add_argument("--skip-bytes", action="store_true")
    p.add_argument("--skip-train", action="store_true")
    p.add_argument("--skip-torch", action="store_true")
    args = p.parse_args()
    hooks = args.hooks.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    report = []

    if not args.skip_bytes:
        report.append(f"Bytes on the wire per step (payload per rank, 2 ranks; PowerSGD rank "
                      f"{args.powersgd_rank}, compressing)\n")
        report.append("| model | hook | tcv bytes/step | x fewer | PyTorch bytes/step | x fewer |")
        report.append("|---|---|---:|---:|---:|---:|")
        for model in ["fmnist_resnet", "resnet50"]:
            for hook in hooks:
                t = tcv_bytes(args.build, model, hook, args.powersgd_rank)
                log(t)
                tb, tr = t["bytes_per_step"], t["wire_ratio"]
                pcell = pr = "-"
                if not args.skip_torch:
                    q = torch_bytes(model, hook, args.powersgd_rank)
                    log(q)
                    if q.get("bytes_per_step") is not None:
                        pcell, pr = f"{q['bytes_per_step']:,}", f"{q['wire_ratio']:.1f}"
                    elif q.get("predicted_bytes_per_step") is not None:
                        pb = q["predicted_bytes_per_step"]
                        pcell = f"{pb:,} (predicted; run failed: {q['error'][:60]})"
                        pr = f"{t['bucket_bytes_per_step'] / pb:.1f}"
                    else:
                        pcell = f"fails: {q['error'][:70]}"
                report.append(f"| {model} | {hook} | {tb:,} | {tr:.1f} | {pcell} | {pr} |")

    if not args.skip_train:
        report.append(f"\nfmnist_resnet top-1 after {args.epochs} epochs, 2 ranks x batch 64, "
                      f"PowerSGD rank {args.powersgd_rank} from iteration {args.powersgd_start}\n")
        report.append("| hook | seed | tcv top-1 | per epoch | s | PyTorch top-1 | per epoch |")
        report.append("|---|---|---:|---|---:|---:|---|")
        for hook in hooks:
            for seed in seeds:
                t = tcv_train(args.build, hook, seed, args.epochs, args.powersgd_rank,
                              args.powersgd_start)
                log(t)
                pcell, pe = "-", "-"
                if not args.skip_torch:
                    q = torch_train(hook, seed, args.epochs, args.powersgd_rank,
                                    args.powersgd_start)
                    log(q)
                    if q.get("top1") is not None:
                        pcell = f"{q['top1']:.2f}"
                        pe = ", ".join(f"{v:.2f}" for v in q["top1_per_epoch"])
                    else:
                        pcell = f"fails: {q['error'][:60]}"
                report.append(f"| {hook} | {seed} | {t['top1']:.2f} | "
                              f"{', '.join(f'{v:.2f}' for v in t['top1_per_epoch'])} | "
                              f"{t['seconds']:.0f} | {pcell} | {pe} |")
    print("\n".join(report))


if __name__ == "__main__":
    main()
