#!/usr/bin/env python3
"""Golden values for tcv's detection mAP (tests/train/test_det_map.cpp).

On synthetic ground truth and detections (scripts/det_map_synth.py: 400 images of
random size, 8 classes of which the last has no ground truth, difficult and crowd
boxes, tied scores, images with more than 100 detections of one class), computes

  - VOC07 11-point and VOC 2010+ area AP per class, with the VOC devkit's formula
    (VOCevaldet.m, written out in Python in det_map_synth.voc_devkit);
  - COCO's 12 summary numbers and AP per category, with pycocotools' COCOeval
    (category ids 1, 3, 4, 7, 8, 11, 13, 20: not contiguous);

and writes them to tests/data/golden/det_map.json. pycocotools comes from PyPI in a
virtual environment only for this script (scripts/pycocotools-venv.sh):

    $(bash scripts/pycocotools-venv.sh) scripts/make_golden_det_map.py
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import det_map_synth as S  # noqa: E402

SEED = 20240607
IMAGES = 400
CLASSES = 8
CATEGORY_IDS = [1, 3, 4, 7, 8, 11, 13, 20]


def main():
    images = S.make_set(SEED, IMAGES, CLASSES)
    v07 = S.voc_devkit(images, CLASSES, use_07=True)
    v10 = S.voc_devkit(images, CLASSES, use_07=False)
    gt, res = S.coco_dicts(images, CLASSES, CATEGORY_IDS)
    stats, per = S.coco_summary(S.coco_eval(gt, res))

    def mean(aps):
        ok = [a for a in aps if a >= 0]
        return sum(ok) / len(ok)

    out = {
        "generator": {"seed": SEED, "images": IMAGES, "classes": CLASSES,
                      "gt_boxes": sum(len(m["gt"]) for m in images),
                      "detections": sum(len(m["dets"]) for m in images)},
        "voc07": {"map": mean(v07), "per_class": v07},
        "voc": {"map": mean(v10), "per_class": v10},
        "coco": {"category_ids": CATEGORY_IDS, "stats": stats, "per_class": per},
    }
    path = os.path.join(HERE, "..", "tests", "data", "golden", "det_map.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(json.dumps(out["generator"]), "\nvoc07", out["voc07"]["map"], "voc", out["voc"]["map"],
          "\ncoco", stats)


if __name__ == "__main__":
    main()
