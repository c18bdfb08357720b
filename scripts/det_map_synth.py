"""Synthetic ground truth and detections for checking detection mAP, and the
reference computations tcv's evaluator is compared with.

Some detections overlap their box with IoU exactly 0.5 or 0.75, on the thresholds.
The data come from splitmix64 with integer arithmetic only (box corners are
multiples of 1/8, scores multiples of 1/1024, areas exact quotients), so
tests/train/test_det_map.cpp rebuilds exactly the same numbers in C++.

  make_set(seed, images, classes, crowded_every) -> list of images, each a dict:
      id, width, height, gt: [(x1, y1, x2, y2, label, difficult, crowd, area)],
      dets: [(x1, y1, x2, y2, label, score)]
  Boxes are in continuous pixel coordinates (tcv's convention); labels 1..classes.
  The last class never has ground truth (its AP is undefined: -1).

  voc_devkit(images, classes, use_07)  -> per-class AP, written from the VOC
      devkit's VOCevaldet.m / VOCap (inclusive corners with the devkit's "+1").
  coco_pycocotools(images, classes, category_ids) -> (stats, per-class AP) from
      pycocotools' COCOeval.
"""
import contextlib
import io

import numpy as np

MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def randint(self, lo, hi):
        """Uniform in [lo, hi) (hi > lo)."""
        return lo + self.next() % (hi - lo)


def make_set(seed, images, classes, crowded_every=50, max_gt=8):
    r = SplitMix64(seed)
    out = []
    for i in range(images):
        W = r.randint(200, 641)
        H = r.randint(200, 641)
        img = {"id": (i * 7919) % 10007 + 1, "width": W, "height": H, "gt": [], "dets": []}
        for _ in range(r.randint(0, max_gt + 1)):
            w = r.randint(4, W // 2)
            h = r.randint(4, H // 2)
            x1 = r.randint(0, W - w)
            y1 = r.randint(0, H - h)
            label = r.randint(1, classes)  # never the last class
            difficult = r.randint(0, 100) < 12
            crowd = r.randint(0, 100) < 6
            area = (w * h * r.randint(50, 101)) / 100
            img["gt"].append((x1, y1, x1 + w, y1 + h, label, difficult, crowd, area))
            if r.randint(0, 100) < 80:
                for _ in range(r.randint(1, 4)):
                    dx1 = x1 + r.randint(-w, w + 1) / 8
                    dy1 = y1 + r.randint(-h, h + 1) / 8
                    dw = max(1, w + r.randint(-w, w + 1) / 8)
                    dh = max(1, h + r.randint(-h, h + 1) / 8)
                    dl = label if r.randint(0, 100) < 90 else r.randint(1, classes + 1)
                    img["dets"].append((dx1, dy1, dx1 + dw, dy1 + dh, dl, r.randint(0, 1024) / 1024))
            if r.randint(0, 100) < 10:  # IoU exactly 0.5 or 0.75: on a threshold
                f = (0.5, 0.75)[r.randint(0, 2)]
                img["dets"].append((x1, y1, x1 + w * f, y1 + h, label, r.randint(0, 1024) / 1024))
        n_fp = r.randint(0, 5)
        crowded = crowded_every and i % crowded_every == 7
        for k in range(n_fp + (120 if crowded else 0)):  # crowded: > COCO's 100 per category
            w = r.randint(8, W // 2) + r.randint(0, 8) / 8
            h = r.randint(8, H // 2) + r.randint(0, 8) / 8
            x1 = r.randint(0, W - W // 2) + r.randint(0, 8) / 8
            y1 = r.randint(0, H - H // 2) + r.randint(0, 8) / 8
            label = 1 if k >= n_fp else r.randint(1, classes + 1)
            img["dets"].append((x1, y1, x1 + w, y1 + h, label, r.randint(0, 1024) / 1024))
        out.append(img)
    return out


def voc_devkit(images, classes, use_07, ovthresh=0.5):
    """Per-class AP as VOCevaldet.m computes it (-1 for a class without
    non-difficult ground truth). Detections are listed image by image in
    increasing image id (the order of a results file written in that order)."""
    imgs = sorted(images, key=lambda m: m["id"])
    aps = []
    for c in range(1, classes + 1):
        # Ground truth in the devkit's 1-based inclusive corners.
        gt = {}
        npos = 0
        for m in imgs:
            bb = [(x1 + 1, y1 + 1, x2, y2) for (x1, y1, x2, y2, l, d, cr, a) in m["gt"] if l == c]
            diff = [d for (x1, y1, x2, y2, l, d, cr, a) in m["gt"] if l == c]
            gt[m["id"]] = {"BB": np.array(bb, dtype=np.float64).reshape(-1, 4),
                           "diff": np.array(diff, dtype=bool), "det": [False] * len(bb)}
            npos += sum(1 for d in diff if not d)
        ids, conf, BB = [], [], []
        for m in imgs:
            for (x1, y1, x2, y2, l, s) in m["dets"]:
                if l == c:
                    ids.append(m["id"])
                    conf.append(s)
                    BB.append((x1 + 1, y1 + 1, x2, y2))
        if npos == 0:
            aps.append(-1.0)
            continue
        conf = np.array(conf, dtype=np.float64)
        BB = np.array(BB, dtype=np.float64).reshape(-1, 4)
        si = np.argsort(-conf, kind="stable")  # MATLAB's sort is stable
        nd = len(si)
        tp = np.zeros(nd)
        fp = np.zeros(nd)
        for d in range(nd):
            g = gt[ids[si[d]]]
            bb = BB[si[d]]
            ovmax = -np.inf
            jmax = -1
            for j in range(g["BB"].shape[0]):
                bbgt = g["BB"][j]
                bi = [max(bb[0], bbgt[0]), max(bb[1], bbgt[1]), min(bb[2], bbgt[2]), min(bb[3], bbgt[3])]
                iw = bi[2] - bi[0] + 1
                ih = bi[3] - bi[1] + 1
                if iw > 0 and ih > 0:
                    ua = ((bb[2] - bb[0] + 1) * (bb[3] - bb[1] + 1) +
                          (bbgt[2] - bbgt[0] + 1) * (bbgt[3] - bbgt[1] + 1) - iw * ih)
                    ov = iw * ih / ua
                    if ov > ovmax:
                        ovmax = ov
                        jmax = j
            if ovmax >= ovthresh:
                if not g["diff"][jmax]:
                    if not g["det"][jmax]:
                        tp[d] = 1
                        g["det"][jmax] = True
                    else:
                        fp[d] = 1
            else:
                fp[d] = 1
        fp = np.cumsum(fp)
        tp = np.cumsum(tp)
        rec = tp / float(npos)
        prec = tp / np.maximum(tp + fp, np.finfo(np.float64).eps)
        if use_07:
            ap = 0.0
            for t in np.arange(0.0, 1.1, 0.1):
                p = 0.0 if np.sum(rec >= t) == 0 else np.max(prec[rec >= t])
                ap += p / 11.0
        else:
            mrec = np.concatenate(([0.0], rec, [1.0]))
            mpre = np.concatenate(([0.0], prec, [0.0]))
            for i in range(mpre.size - 1, 0, -1):
                mpre[i - 1] = max(mpre[i - 1], mpre[i])
            i = np.where(mrec[1:] != mrec[:-1])[0]
            ap = float(np.sum((mrec[i + 1] - mrec[i]) * mpre[i + 1]))
        aps.append(float(ap))
    return aps


def coco_dicts(images, classes, category_ids):
    """The ground truth as a COCO dataset dict and the detections as a results list."""
    gt = {"images": [], "annotations": [], "categories": []}
    res = []
    for k in range(classes):
        gt["categories"].append({"id": category_ids[k], "name": "class%d" % (k + 1)})
    aid = 0
    for m in images:
        gt["images"].append({"id": m["id"], "width": m["width"], "height": m["height"],
                             "file_name": "%d.jpg" % m["id"]})
        for (x1, y1, x2, y2, l, d, cr, a) in m["gt"]:
            aid += 1
            gt["annotations"].append({"id": aid, "image_id": m["id"], "category_id": category_ids[l - 1],
                                      "bbox": [x1, y1, x2 - x1, y2 - y1], "area": a,
                                      "iscrowd": 1 if cr else 0})
        for (x1, y1, x2, y2, l, s) in m["dets"]:
            res.append({"image_id": m["id"], "category_id": category_ids[l - 1],
                        "bbox": [x1, y1, x2 - x1, y2 - y1], "score": s})
    return gt, res


def coco_eval(gt_dict, res):
    """A COCOeval after evaluate() and accumulate() (pycocotools' own output silenced)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = gt_dict
        coco.createIndex()
        dt = coco.loadRes(res) if res else COCO()
        E = COCOeval(coco, dt, "bbox")
        E.evaluate()
        E.accumulate()
    return E


def coco_summary(E):
    """COCOeval.stats and AP@[.5:.95] per category (-1 without ground truth)."""
    with contextlib.redirect_stdout(io.StringIO()):
        E.summarize()
    prec = E.eval["precision"]  # (T, R, K, A, M)
    per = []
    for k in range(prec.shape[2]):
        s = prec[:, :, k, 0, 2]
        per.append(float(np.mean(s[s > -1])) if np.any(s > -1) else -1.0)
    return [float(v) for v in E.stats], per
