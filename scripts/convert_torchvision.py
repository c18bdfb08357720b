#!/usr/bin/env python3
"""Converts a torchvision (or any PyTorch) state dict into a safetensors file tcv loads.

    python3 scripts/convert_torchvision.py resnet50-0676ba61.pth resnet50.safetensors

Needs PyTorch on the machine that converts (tcv itself never does). tcv's
models use torchvision's parameter names, so the result loads directly with
Module::load_state_dict or a config's pretrained-weights key; that includes
detection checkpoints such as ssd300_vgg16_coco-b556d3b4.pth (tcv's "ssd300"
with 91 classes: backbone.*, head.classification_head.*, head.regression_head.*). The safetensors
format is written here by hand (8-byte header length, JSON header, raw
little-endian data), so the `safetensors` package is not needed.
"""
import argparse
import json
import struct
import sys

import torch

DTYPES = {
    torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int32: "I32", torch.int64: "I64", torch.uint8: "U8", torch.bool: "BOOL",
}


def load_state_dict(path):
    obj = torch.load(path, map_location="cpu")
    # Training checkpoints often wrap the weights.
    for key in ("state_dict", "model", "model_state_dict"):
        if isinstance(obj, dict) and key in obj and isinstance(obj[key], dict):
            obj = obj[key]
            break
    if not isinstance(obj, dict):
        sys.exit(f"{path}: expected a state dict (name -> tensor), got {type(obj).__name__}")
    # DataParallel/DDP checkpoints prefix every name with "module.".
    return {(k[7:] if k.startswith("module.") else k): v for k, v in obj.items()
            if isinstance(v, torch.Tensor)}


def save_safetensors(tensors, path, metadata):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        if t.dtype not in DTYPES:
            sys.exit(f"{name}: dtype {t.dtype} has no safetensors equivalent")
        data = t.detach().contiguous().cpu()
        raw = data.reshape(-1).view(torch.uint8).numpy().tobytes() if data.numel() else b""
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(data.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # align the data to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("input", help="a .pth/.pt file holding a state dict")
    p.add_argument("output", help="the .safetensors file to write")
    args = p.parse_args()
    tensors = load_state_dict(args.input)
    save_safetensors(tensors, args.output, {"format": "pt", "source": args.input})
    print(f"wrote {len(tensors)} tensors to {args.output}")


if __name__ == "__main__":
    main()
