#!/usr/bin/env python3
"""PyTorch side of the DataLoader comparison: decode + augment images/s on JPEGs.

Reads an ImageFolder tree (root/<class>/<image>.jpg, as `tcv-bench data --dir DIR`
writes it) with torch.utils.data.DataLoader and PIL, through torchvision's
training pipeline written out here (torchvision may be absent):
RandomResizedCrop(224) (torchvision's parameter sampling, then PIL crop + bilinear
resize, as torchvision does on PIL images), RandomHorizontalFlip, ToTensor,
Normalize(ImageNet mean/std). Prints one JSON line with images/s per worker count
(one epoch each, the best of --epochs).

    /usr/bin/python3 bench/compare/dataloader_torch.py --dir DIR [--workers 0,1,2]
"""
import argparse
import json
import math
import os
import random
import resource
import time

import numpy as np
import torch
import PIL
from PIL import Image

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm")


def rrc_params(width, height, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision.transforms.RandomResizedCrop.get_params, with Python's random."""
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * random.uniform(*scale)
        aspect = math.exp(random.uniform(*log_ratio))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return random.randint(0, height - h), random.randint(0, width - w), h, w
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


class Folder(torch.utils.data.Dataset):
    def __init__(self, root, size):
        self.size = size
        classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
        self.samples = []
        for label, c in enumerate(classes):
            for dirpath, _, files in sorted(os.walk(os.path.join(root, c), followlinks=True)):
                for f in sorted(files):
                    if f.lower().endswith(EXTENSIONS):
                        self.samples.append((os.path.join(dirpath, f), label))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        with open(path, "rb") as f:
            img = Image.open(f).convert("RGB")
        top, left, h, w = rrc_params(*img.size)
        img = img.crop((left, top, left + w, top + h)).resize((self.size, self.size), Image.BILINEAR)
        if random.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        x = torch.from_numpy(np.asarray(img, dtype=np.uint8).copy()).permute(2, 0, 1).contiguous()
        x = x.to(torch.float32).div(255)
        return (x - MEAN) / STD, label


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--crop", type=int, default=224)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--workers", default="0,1,2")
    p.add_argument("--epochs", type=int, default=1)
    # Intra-op threads of the main process (workers=0). 1, as DataLoader gives its worker
    # processes: per-sample ops are too small for more, and 2 threads spinning on a busy
    # machine made workers=0 up to 10x slower.
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    ds = Folder(args.dir, args.crop)
    ds[0]  # warm-up: PIL loads its JPEG plugin on first use
    runs = []
    for w in [int(v) for v in args.workers.split(",")]:
        loader = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=w)
        best = None
        for _ in range(args.epochs):
            t0 = time.perf_counter()
            seen = sum(x.shape[0] for x, _ in loader)  # workers start with the iterator
            s = time.perf_counter() - t0
            if best is None or seen / s > best["images_per_sec"]:
                best = {"workers": w, "images_per_sec": seen / s, "seconds": s, "images": seen}
        runs.append(best)
    print(json.dumps({"bench": "data", "impl": "pytorch", "torch": torch.__version__,
                      "pil": PIL.__version__, "images": len(ds), "crop": args.crop,
                      "batch": args.batch, "epochs": args.epochs, "runs": runs,
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))


if __name__ == "__main__":
    main()
