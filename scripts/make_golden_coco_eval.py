#!/usr/bin/env python3
"""Writes tests/data/golden/coco_eval/: a COCO instances file, a results file,
what pycocotools prints for them (COCO.loadRes + COCOeval("bbox") +
summarize(): summary.txt) and its stats in full (stats.json), for examples/evaluate_coco.cpp, which must print the same.

The data: scripts/det_map_synth.py's set (60 images, 6 categories with
non-consecutive ids), plus, per image, objects of exactly 32 x 32 and
96 x 96 pixels (COCO's area-range edges) with detections of the same size at
decimal positions (x = 100.3, ...): there x + w - x is not w in binary, and
an evaluator that recomputes the width from the corners moves such a
detection out of its area range.

    PY=$(bash scripts/pycocotools-venv.sh); $PY scripts/make_golden_coco_eval.py
"""
import contextlib
import io
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import det_map_synth as S  # noqa: E402

OUT = os.path.join(HERE, "..", "tests", "data", "golden", "coco_eval")
CATEGORY_IDS = [1, 3, 7, 8, 15, 90]


def main():
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    images = S.make_set(seed=20261202, images=60, classes=len(CATEGORY_IDS), crowded_every=0)
    gt, res = S.coco_dicts(images, len(CATEGORY_IDS), CATEGORY_IDS)
    aid = len(gt["annotations"])
    r = S.SplitMix64(7)
    for m in gt["images"]:
        for k, side in enumerate((32, 96)):
            x = 10 + 110 * k + r.randint(0, 20)
            y = 10 + r.randint(0, 20)
            cat = CATEGORY_IDS[r.randint(0, len(CATEGORY_IDS) - 1)]
            aid += 1
            gt["annotations"].append({"id": aid, "image_id": m["id"], "category_id": cat,
                                      "bbox": [x, y, side, side], "area": side * side,
                                      "iscrowd": 0})
            for frac in ("0.1", "0.3", "0.7"):
                res.append({"image_id": m["id"], "category_id": cat,
                            "bbox": [x + float(frac), y + float(frac), side, side],
                            "score": r.randint(0, 1024) / 1024})
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "instances.json"), "w") as f:
        json.dump(gt, f)
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(res, f)
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(os.path.join(OUT, "instances.json"))
        dt = coco.loadRes(os.path.join(OUT, "results.json"))
        E = COCOeval(coco, dt, "bbox")
        E.evaluate()
        E.accumulate()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        E.summarize()
    with open(os.path.join(OUT, "summary.txt"), "w") as f:
        f.write(out.getvalue())
    with open(os.path.join(OUT, "stats.json"), "w") as f:
        json.dump({"stats": [float(v) for v in E.stats]}, f)
    print(out.getvalue(), end="")
    print("%d images, %d objects, %d detections" % (len(gt["images"]), len(gt["annotations"]),
                                                    len(res)))


if __name__ == "__main__":
    main()
