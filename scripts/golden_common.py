"""What the golden scripts share, in numpy only: the closed-form values they feed
the references (tests/support/golden_formula.h repeats them in C++) and the
safetensors writer for their outputs.

  seed(name)       = sum((j + 1) * ord(c) for j, c in enumerate(name)) % 1009
  uniform(n, s)[i] = murmur3's 32-bit finalizer of the Weyl sequence
                     i * 0x9E3779B1 + (s * 0x7F4A7C15 + 1), over 2^32: in [0, 1)
"""
import json
import os
import struct

import numpy as np


def seed(name):
    return sum((j + 1) * ord(c) for j, c in enumerate(name)) % 1009


def uniform(n, s, offset=0):
    """u(i, s) for i = offset .. offset + n - 1, as float64."""
    m = np.uint64(0xFFFFFFFF)
    i = np.arange(offset, offset + n, dtype=np.uint64)
    h = (i * np.uint64(0x9E3779B1) + np.uint64(s * 0x7F4A7C15 + 1)) & m
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & m
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & m
    h ^= h >> np.uint64(16)
    return h.astype(np.float64) / 4294967296.0


def formula_weights(name, shape):
    """The closed-form value of a model's parameter or buffer `name`, float32 of
    `shape`, with r = 2 uniform(numel, seed(name)) - 1: 0 for num_batches_tracked,
    0.1 r for running means, 1 + 0.5 r for running variances, He-uniform
    sqrt(6 / fan_in) r for tensors of two or more dimensions, 1 + 0.2 r for
    other weights and 0.1 r for the rest (biases)."""
    shape = tuple(int(d) for d in shape)
    n = int(np.prod(shape))
    if name.endswith("num_batches_tracked"):
        return np.zeros(shape, dtype=np.float32)
    r = 2.0 * uniform(n, seed(name)) - 1.0
    if name.endswith("running_mean"):
        v = 0.1 * r
    elif name.endswith("running_var"):
        v = 1.0 + 0.5 * r
    elif len(shape) >= 2:
        v = np.sqrt(6.0 / (n // shape[0])) * r
    elif name.endswith("weight"):
        v = 1.0 + 0.2 * r
    else:
        v = 0.1 * r
    return v.astype(np.float32).reshape(shape)


SAFETENSORS_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64",
                      np.dtype(np.int32): "I32", np.dtype(np.int64): "I64"}


def write_safetensors(path, arrays, metadata):
    """Writes `arrays` (name -> numpy array, in order; f32, f64, i32 or i64) with
    `metadata` (str -> str) as a safetensors file, the header padded to 8 bytes."""
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        b = a.tobytes()
        header[name] = {"dtype": SAFETENSORS_DTYPES[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    print(f"wrote {len(arrays)} tensors, {os.path.getsize(path)} bytes, to {path}")
