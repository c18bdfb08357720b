#!/usr/bin/env python3
"""Writes tests/data/golden/ssd300_torchcv_priors.safetensors: the default
boxes of TorchCV's SSD300 VOC recipe, computed by a numpy transcription of
TorchCV's SSDPriorBoxLayer (model/det/layers/ssd_priorbox_layer.py, anchor
method "ssd", clip False), with its settings from
configs/det/voc/ssd300_vgg16_voc_det.conf:

  cur_anchor_sizes  [30, 60, 111, 162, 213, 264, 315]
  aspect_ratio_list [[2], [2, 3], [2, 3], [2, 3], [2], [2]]
  feature maps      38, 19, 10, 5, 3, 1 on a 300 x 300 input

TorchCV's layer, step by step, in numpy with its dtypes: per feature map the
stride is image / map (a Python float: 300 / 38), the base boxes (stride / 2,
stride / 2, w, h) are Python floats turned into f32 (torch.FloatTensor of a
float64 array), the grid offsets are np.arange(0, image - stride / 2, stride)
(float64) turned into f32, and the two are added in f32. The target
generator then turns (cx, cy, w, h) into corners in f32: centre -/+ size / 2.
tcv's AnchorLayout::torchcv must give the same bits
(tests/models/test_ssd.cpp).

    /usr/bin/python3 scripts/make_golden_torchcv_priors.py
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden_cls import save_safetensors  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "golden", "ssd300_torchcv_priors.safetensors")

SIZES = [30, 60, 111, 162, 213, 264, 315]
RATIOS = [[2], [2, 3], [2, 3], [2, 3], [2], [2]]
MAPS = [38, 19, 10, 5, 3, 1]
IMG_W = IMG_H = 300


def torchcv_priors():
    per_map = []
    for i, fm in enumerate(MAPS):
        fm_w = fm_h = fm
        stride_w, stride_h = IMG_W / fm_w, IMG_H / fm_h
        off_w, off_h = 0.5 * stride_w, 0.5 * stride_h
        s = SIZES[i]
        boxes = [(off_w, off_h, s, s)]
        extra = math.sqrt(SIZES[i] * SIZES[i + 1])
        boxes.append((off_w, off_h, extra, extra))
        for ar in RATIOS[i]:
            boxes.append((off_w, off_h, s * math.sqrt(ar), s / math.sqrt(ar)))
            boxes.append((off_w, off_h, s / math.sqrt(ar), s * math.sqrt(ar)))
        base = np.array(boxes).astype(np.float32)  # torch.FloatTensor(np.array(boxes))
        n = base.shape[0]
        anchors = np.tile(base[None], (fm_h * fm_w, 1, 1)).reshape(-1, 4)
        grid_h = np.arange(0, IMG_H - off_h, stride_h)
        grid_w = np.arange(0, IMG_W - off_w, stride_w)
        a, b = np.meshgrid(grid_w, grid_h)
        xy = np.concatenate([a.astype(np.float32).reshape(-1, 1),
                             b.astype(np.float32).reshape(-1, 1)], 1)
        xy = np.repeat(xy.reshape(-1, 1, 2), n, axis=1).reshape(-1, 2)
        anchors[:, :2] = anchors[:, :2] + xy  # f32 + f32
        per_map.append(anchors)
    priors = np.concatenate(per_map, 0)
    half = priors[:, 2:] / np.float32(2)
    corners = np.concatenate([priors[:, :2] - half, priors[:, :2] + half], 1)
    return priors.astype(np.float32), corners.astype(np.float32)


def main():
    priors, corners = torchcv_priors()
    save_safetensors(OUT, {"priors": torch.from_numpy(priors), "corners": torch.from_numpy(corners)},
                     {"source": "scripts/make_golden_torchcv_priors.py"})
    print("%d priors; first %s, last %s" % (priors.shape[0], priors[0], priors[-1]))


if __name__ == "__main__":
    main()
