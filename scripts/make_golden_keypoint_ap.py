#!/usr/bin/env python3
"""Golden values for tcv's keypoint AP (tests/train/test_keypoint_ap.cpp).

Builds synthetic COCO person-keypoint ground truth and detections, runs
pycocotools' COCOeval in 'keypoints' mode on them, and writes both the data and
COCOeval.stats to tests/data/golden/keypoint_ap.json, so the C++ test evaluates
exactly the same annotations.

The data exercise every rule of the keypoint metric: people of every size
(small ones are outside every area range but 'all'), partly labelled keypoints
(v = 0), people with no labelled keypoint (num_keypoints = 0, ignored), crowds,
images without ground truth or without detections, detections with missing
keypoints written as (0, 0, 0) (their keypoint box then reaches the origin, as
loadRes computes it), tied scores, and images with more than 20 detections.
Three sets: a mixed one, a near-perfect one and one where nothing is found.

pycocotools comes from PyPI in a virtual environment only for this script
(scripts/pycocotools-venv.sh):

    $(bash scripts/pycocotools-venv.sh) scripts/make_golden_keypoint_ap.py
"""
import contextlib
import io
import json
import os
import random

from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

HERE = os.path.dirname(os.path.abspath(__file__))
K = 17


def r2(x):
    return round(x, 2)


def make_person(rng, w, h):
    """A ground-truth person: a box and 17 keypoints inside it, some unlabelled."""
    size = rng.choice([rng.uniform(12, 30), rng.uniform(35, 95), rng.uniform(100, 220)])
    bw, bh = size * rng.uniform(0.4, 0.8), size
    x, y = rng.uniform(0, max(1.0, w - bw)), rng.uniform(0, max(1.0, h - bh))
    kps = []
    for _ in range(K):
        if rng.random() < 0.25:
            kps += [0, 0, 0]
        else:
            kps += [r2(x + rng.uniform(0, bw)), r2(y + rng.uniform(0, bh)), rng.choice([1, 2])]
    if rng.random() < 0.08:  # a person nobody labelled
        kps = [0] * (3 * K)
    n = sum(1 for k in range(K) if kps[3 * k + 2] > 0)
    area = r2(bw * bh * rng.uniform(0.5, 0.9))
    return {"keypoints": kps, "num_keypoints": n, "bbox": [r2(x), r2(y), r2(bw), r2(bh)],
            "area": area, "iscrowd": 1 if rng.random() < 0.05 else 0}


def detect(rng, gt, noise, drop):
    """A detection of `gt`: its keypoints moved by noise · sqrt(area), some missing."""
    s = max(gt["area"], 1.0) ** 0.5
    x, y, bw, bh = gt["bbox"]
    kps = []
    for k in range(K):
        if rng.random() < drop:
            kps += [0, 0, 0]
            continue
        if gt["keypoints"][3 * k + 2] > 0:
            gx, gy = gt["keypoints"][3 * k], gt["keypoints"][3 * k + 1]
        else:
            gx, gy = x + rng.uniform(0, bw), y + rng.uniform(0, bh)
        kps += [r2(gx + rng.gauss(0, noise * s)), r2(gy + rng.gauss(0, noise * s)), 1]
    return kps


def make_set(seed, images, noise, miss, false_pos):
    rng = random.Random(seed)
    imgs, anns, dets = [], [], []
    ann_id = 1
    for i in range(images):
        img_id = 3 * i + 1  # not contiguous
        w, h = rng.randint(200, 640), rng.randint(200, 480)
        imgs.append({"id": img_id, "width": w, "height": h})
        people = rng.choice([0, 1, 2, 3, 4, 6])
        for _ in range(people):
            p = make_person(rng, w, h)
            p.update({"id": ann_id, "image_id": img_id, "category_id": 1})
            ann_id += 1
            anns.append(p)
            if rng.random() < miss:
                continue
            score = rng.choice([r2(rng.uniform(0.05, 1.0)), 0.5])  # ties at 0.5
            dets.append({"image_id": img_id, "category_id": 1, "score": score,
                         "keypoints": detect(rng, p, noise, 0.1)})
        extra = rng.choice([0, 0, 1, 3]) if i % 17 else 25  # some images with > 20 detections
        for _ in range(extra if rng.random() < false_pos else 0):
            fx, fy = rng.uniform(0, w), rng.uniform(0, h)
            kps = []
            for _ in range(K):
                kps += [r2(fx + rng.uniform(-40, 40)), r2(fy + rng.uniform(-60, 60)), 1]
            dets.append({"image_id": img_id, "category_id": 1, "score": r2(rng.uniform(0, 0.6)),
                         "keypoints": kps})
    return imgs, anns, dets


def evaluate(imgs, anns, dets):
    gt = COCO()
    gt.dataset = {"images": imgs, "annotations": anns,
                  "categories": [{"id": 1, "name": "person"}]}
    with contextlib.redirect_stdout(io.StringIO()):
        gt.createIndex()
        dt = gt.loadRes(json.loads(json.dumps(dets))) if dets else COCO()
        if not dets:
            dt.dataset = {"images": imgs, "annotations": [], "categories": gt.dataset["categories"]}
            dt.createIndex()
        ev = COCOeval(gt, dt, "keypoints")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return [float(s) for s in ev.stats]


def main():
    sets = []
    for name, seed, images, noise, miss, fp in [("mixed", 7, 60, 0.04, 0.2, 0.6),
                                                 ("precise", 11, 25, 0.005, 0.0, 0.2),
                                                 ("noisy", 13, 30, 0.1, 0.3, 1.0)]:
        imgs, anns, dets = make_set(seed, images, noise, miss, fp)
        stats = evaluate(imgs, anns, dets)
        sets.append({"name": name, "images": imgs, "annotations": anns, "detections": dets,
                     "stats": stats})
        print(name, len(imgs), "images", len(anns), "people", len(dets), "detections", stats)
    path = os.path.join(HERE, "..", "tests", "data", "golden", "keypoint_ap.json")
    with open(path, "w") as f:
        json.dump({"generator": "scripts/make_golden_keypoint_ap.py", "sets": sets}, f,
                  separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
