#!/usr/bin/env python3
"""OpenPose training targets computed the way TorchCV computes them, for the
golden file tests/data/test_pose_targets.cpp checks tcv against
(data/pose/targets.h):

  tests/data/golden/pose_targets.safetensors
    img<id>.heatmaps  f32 (19, H/s, W/s)  18 OpenPose keypoints, then background
    img<id>.pafs      f32 (38, H/s, W/s)  (x, y) per limb of TorchCV's limb_seq
    img<id>.mask      f32 (1, H/s, W/s)   the loss mask, nearest-resized

for the images of a COCO person keypoints file (tests/data/golden/pose_scenes.json,
written by `tcv-data pose-scenes`).

Formulas: TorchCV's data/pose/utils/heatmap_generator.py and paf_generator.py
and its COCO preprocessing (data/pose/preprocess/coco/coco_pose_generator.py:
which people are trained on, the neck, the visibility codes, the mask of
crowds and of people left out), in TorchCV's pixel-index coordinates (the
file's values), with tcv's two documented choices:
  * heatmaps take the maximum over people (CMU's OpenPose; TorchCV adds and clips at 1);
  * the PAF grid point of cell (i, j) is the cell centre, the point the heatmap
    formula uses (j s + s/2 - 0.5 in pixel indices); TorchCV's PAFs use j s.
    In cell units: a = (x + 0.5) / s - 0.5 instead of x / s.

Run: /usr/bin/python3 scripts/pose_targets_ref.py [annotations.json] [out.safetensors]
(Debian's python3-numpy; a second or so.)
"""
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_common import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

STRIDE = 8
SIGMA = 7.0
THETA = 1.0  # TorchCV's target.paf.theta: a limb's half-width in cells
MIN_KEYPOINTS, MIN_AREA, MIN_CENTRE_DISTANCE = 5, 32 * 32, 0.3

COCO_TO_OURS = [0, 15, 14, 17, 16, 5, 2, 6, 3, 7, 4, 11, 8, 12, 9, 13, 10]
LIMB_SEQ = [[3, 4], [4, 5], [6, 7], [7, 8], [9, 10], [10, 11], [12, 13], [13, 14],
            [1, 2], [2, 9], [2, 12], [2, 3], [2, 6], [1, 16], [1, 15], [16, 18], [15, 17],
            [3, 17], [6, 18]]


def decode_rle(seg, h, w):
    counts = seg["counts"]
    assert isinstance(counts, list), "the scenes write uncompressed RLE"
    flat = np.zeros(h * w, dtype=np.uint8)
    p, on = 0, False
    for c in counts:
        if on:
            flat[p:p + c] = 1
        p += c
        on = not on
    return flat.reshape(w, h).T  # column-major


def select(anns):
    """coco_pose_generator.py: crowd, trained and left-out people."""
    persons, centres, missed, crowds = [], [], [], []
    for a in anns:
        if a["iscrowd"] == 1:
            crowds.append(a)
            continue
        if a["num_keypoints"] < MIN_KEYPOINTS or a["area"] < MIN_AREA:
            missed.append(a)
            continue
        x, y, w, h = a["bbox"]
        c = [x + w / 2.0, y + h / 2.0]
        if any(math.sqrt((c[0] - pc[0]) ** 2 + (c[1] - pc[1]) ** 2) < pc[2] * MIN_CENTRE_DISTANCE
               for pc in centres):
            missed.append(a)
            continue
        centres.append([c[0], c[1], max(w, h)])
        persons.append(a)
    return persons, missed, crowds


def to_ours(a):
    """17 COCO keypoints -> 18 OpenPose ones; visibility 1 visible, 0 hidden, -1 unlabelled."""
    k = a["keypoints"]
    coco = []
    for p in range(17):
        v = k[3 * p + 2]
        coco.append([k[3 * p], k[3 * p + 1], 1 if v == 2 else (0 if v == 1 else -1)])
    ours = [[0.0, 0.0, -1]] * 18
    ours = [list(o) for o in ours]
    for i in range(17):
        ours[COCO_TO_OURS[i]] = list(coco[i])
    ours[1][0] = (coco[5][0] + coco[6][0]) * 0.5
    ours[1][1] = (coco[5][1] + coco[6][1]) * 0.5
    if coco[5][2] == coco[6][2]:
        ours[1][2] = coco[5][2]
    elif coco[5][2] == -1 or coco[6][2] == -1:
        ours[1][2] = -1
    else:
        ours[1][2] = 0
    return ours


def heatmaps(kpts, width, height):
    num_keypoints = 18
    heatmap = np.zeros((num_keypoints + 1, height // STRIDE, width // STRIDE), dtype=np.float32)
    start = STRIDE / 2.0 - 0.5
    y_range = list(range(height // STRIDE))
    x_range = list(range(width // STRIDE))
    xx, yy = np.meshgrid(x_range, y_range)
    xx = xx * STRIDE + start
    yy = yy * STRIDE + start
    for person in kpts:
        for j in range(num_keypoints):
            if person[j][2] < 0:
                continue
            x, y = person[j][0], person[j][1]
            d2 = (xx - x) ** 2 + (yy - y) ** 2
            exponent = d2 / 2.0 / SIGMA / SIGMA
            mask = exponent <= 4.6052
            cofid_map = np.multiply(mask, np.exp(-exponent))
            heatmap[j] = np.maximum(heatmap[j], cofid_map)  # TorchCV: += and clip at 1
    heatmap[num_keypoints] = 1.0 - np.max(heatmap[:-1], axis=0)
    return heatmap


def pafs(kpts, input_width, input_height):
    width, height = input_width // STRIDE, input_height // STRIDE
    acc = np.zeros((len(LIMB_SEQ) * 2, height, width), dtype=np.float32)
    cnt = np.zeros((len(LIMB_SEQ), height, width), dtype=np.int32)
    for person in kpts:
        for i, (a, b) in enumerate(LIMB_SEQ):
            a, b = a - 1, b - 1
            if person[a][2] < 0 or person[b][2] < 0:
                continue
            # Cell centres (TorchCV: x / stride).
            ax = (person[a][0] + 0.5) / STRIDE - 0.5
            ay = (person[a][1] + 0.5) / STRIDE - 0.5
            bx = (person[b][0] + 0.5) / STRIDE - 0.5
            by = (person[b][1] + 0.5) / STRIDE - 0.5
            bax, bay = bx - ax, by - ay
            norm_ba = math.sqrt(bax * bax + bay * bay)
            if norm_ba == 0:
                continue
            bax /= norm_ba
            bay /= norm_ba
            min_w = max(int(round(min(ax, bx) - THETA)), 0)
            max_w = min(int(round(max(ax, bx) + THETA)), width)
            min_h = max(int(round(min(ay, by) - THETA)), 0)
            max_h = min(int(round(max(ay, by) + THETA)), height)
            if min_w >= max_w or min_h >= max_h:
                continue
            xx, yy = np.meshgrid(np.arange(min_w, max_w), np.arange(min_h, max_h))
            limb_width = np.abs(bax * (yy - ay) - bay * (xx - ax))
            mask = limb_width < THETA
            vec_map = np.zeros((2, height, width), dtype=np.float32)
            vec_map[:, yy, xx] = np.repeat(mask[np.newaxis], 2, axis=0)
            vec_map[:, yy, xx] *= np.array([bax, bay])[:, np.newaxis, np.newaxis]
            on = np.logical_or(np.abs(vec_map[0:1]) > 0, np.abs(vec_map[1:2]) > 0)
            acc[2 * i:2 * i + 2] = np.multiply(acc[2 * i:2 * i + 2], cnt[i:i + 1])
            acc[2 * i:2 * i + 2] += vec_map
            cnt[i:i + 1][on] += 1
            zero = cnt[i:i + 1] == 0
            cnt[i:i + 1][zero] = 1
            acc[2 * i:2 * i + 2] = np.divide(acc[2 * i:2 * i + 2], cnt[i:i + 1])
            cnt[i:i + 1][zero] = 0
    return acc


def loss_mask(persons, missed, crowds, width, height):
    mask_all = np.zeros((height, width), dtype=np.uint8)
    for a in persons:
        mask_all |= decode_rle(a["segmentation"], height, width)
    mask_miss = np.zeros((height, width), dtype=np.uint8)
    for a in missed:
        mask_miss |= decode_rle(a["segmentation"], height, width)
    for a in crowds:
        crowd = decode_rle(a["segmentation"], height, width)
        mask_miss |= crowd & (1 - mask_all)
    full = (1 - mask_miss).astype(np.float32)
    # The nearest resize to (H / s, W / s): pixel (i s + s / 2, j s + s / 2).
    h, w = height // STRIDE, width // STRIDE
    rows = np.arange(h) * STRIDE + STRIDE // 2
    cols = np.arange(w) * STRIDE + STRIDE // 2
    return full[np.ix_(rows, cols)][np.newaxis]


def main():
    golden = os.path.join(ROOT, "tests", "data", "golden")
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(golden, "pose_scenes.json")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(golden, "pose_targets.safetensors")
    doc = json.load(open(src))
    tensors = {}
    for im in doc["images"]:
        anns = [a for a in doc["annotations"] if a["image_id"] == im["id"]]
        persons, missed, crowds = select(anns)
        kpts = [to_ours(a) for a in persons]
        w, h = im["width"], im["height"]
        key = f"img{im['id']}"
        tensors[key + ".heatmaps"] = heatmaps(kpts, w, h)
        tensors[key + ".pafs"] = pafs(kpts, w, h)
        tensors[key + ".mask"] = loss_mask(persons, missed, crowds, w, h)
        print(f"image {im['id']}: {len(persons)} trained, {len(missed)} left out, "
              f"{len(crowds)} crowds")
    meta = {"stride": str(STRIDE), "sigma": str(SIGMA), "limb_width": str(THETA),
            "source": os.path.basename(src)}
    write_safetensors(out, {n: np.asarray(t, dtype=np.float32) for n, t in tensors.items()}, meta)


if __name__ == "__main__":
    main()
