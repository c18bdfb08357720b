"""What the side-by-side scripts in bench/compare share."""
import json
import socket
import statistics
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
