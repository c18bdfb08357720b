"""What the side-by-side scripts in bench/compare share."""
import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import time

# PyTorch's fastest setting on these machines: glibc keeps freed memory instead of
# returning it to the kernel (1.5-2.5x faster PyTorch steps here).
TORCH_ENV = {"GLIBC_TUNABLES": "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736"}


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def last_json(out):
    """The last line of a program's output that is a JSON object, parsed."""
    return json.loads([l for l in out.splitlines() if l.strip().startswith("{")][-1])


HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd, env):
    """Runs `cmd` to its end (an error if it fails): the last JSON object it printed."""
    return last_json(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)


def tcv_train_step(build, model, threads, flags, env=None):
    """tcv-bench train --model `model` --json with `flags`, on `threads` OpenMP threads."""
    env = dict(os.environ if env is None else env, OMP_NUM_THREADS=str(threads))
    return run_json([os.path.join(build, "apps", "tcv-bench"), "train", "--model", model, *flags,
                     "--json"], env)


def torch_train_step(script, threads, flags, env=None):
    """A PyTorch step script of this folder with `flags`, on `threads` threads, with
    PyTorch's fastest malloc settings."""
    env = dict(os.environ if env is None else env, **TORCH_ENV)
    return run_json(["/usr/bin/python3", os.path.join(HERE, script), "--threads", str(threads),
                     *flags], env)


def median_step_ms(step, warmup, steps):
    """Runs step() `warmup` times untimed, then `steps` times timed: the median
    milliseconds per call and the last call's result."""
    for _ in range(warmup):
        step()
    ms = []
    for _ in range(steps):
        t0 = time.perf_counter()
        out = step()
        ms.append(1000.0 * (time.perf_counter() - t0))
    return statistics.median(ms), out


def time_torch_step(args, model, net, opt, loss_of, **extra):
    """Times SGD steps of `net` (`opt` its optimizer) on the loss loss_of()
    returns, computed under torch.autocast("cpu", bfloat16) when --dtype is
    bf16, and prints print_torch_step's JSON line."""
    import torch

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16,
                            enabled=getattr(args, "dtype", "f32") == "bf16"):
            loss = loss_of()
        loss.backward()
        opt.step()
        return loss

    ms, loss = median_step_ms(step, args.warmup, args.steps)
    print_torch_step(args, model, net, ms, loss.item(), **extra)


def torch_step_parser(batch, image_size, steps, warmup, classes=None, model=None, bf16=True):
    """The flags every PyTorch training-step script takes (as tcv-bench train's)."""
    p = argparse.ArgumentParser()
    if model is not None:
        p.add_argument("--model", default=model)
    p.add_argument("--threads", type=int, default=2)
    if bf16:
        p.add_argument("--dtype", default="f32", choices=["f32", "bf16"],
                       help="bf16: the forward and the loss under torch.autocast(\"cpu\", bfloat16)")
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--image-size", type=int, default=image_size)
    if classes is not None:
        p.add_argument("--classes", type=int, default=classes)
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--warmup", type=int, default=warmup)
    return p


def print_torch_step(args, model, net, ms_per_step, final_loss, **extra):
    """The one JSON line a PyTorch training-step script prints: images/s, the
    median step, peak RSS and the last loss (keys as tcv-bench train --json)."""
    import torch
    row = {"bench": "train", "impl": "pytorch", "torch": torch.__version__}
    if hasattr(args, "dtype"):
        row["dtype"] = args.dtype
    row.update({"model": model, **extra, "threads": torch.get_num_threads(),
                "batch": args.batch, "image_size": args.image_size,
                "parameters": sum(t.numel() for t in net.parameters()),
                "images_per_sec": 1000.0 * args.batch / ms_per_step, "ms_per_step": ms_per_step,
                "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "final_loss": float(final_loss)})
    print(json.dumps(row))
