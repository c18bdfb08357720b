#!/usr/bin/env python3
"""Writes the detection goldens that tests/models/test_ssd_golden.cpp and
tests/engine/test_boxes.cpp check tcv against (no PyTorch is needed there):

  tests/data/golden/det_ssd.safetensors
    ssd300.*   torchvision 0.14's ssd300_vgg16(num_classes=21): its state_dict
               keys and shapes and its parameter count (metadata), a sample of
               its default boxes, and, with closed-form weights and input, a
               sample of the head outputs, the loss of torchvision's
               SSD.compute_loss for closed-form targets, and the gradients of
               that loss (head outputs and selected parameters);
    ssd512.*   a sample of the default boxes torchvision's DefaultBoxGenerator
               makes for the SSD512 settings (TorchCV's anchor sizes);
    loss.*     compute_loss on closed-form head outputs (not a network), in f64,
               and loss32.* the same in f32: the two losses, the matches, and
               samples of the gradients.
  tests/data/golden/det_nms.safetensors
    nms.*      keep lists of torchvision.ops.nms (CPU, f32) on 1,200 closed-form
               cases: tied scores, identical, zero- and negative-area boxes,
               thresholds 0 to 0.9, 0 to 1,000 boxes.

Closed forms (as scripts/make_golden_cls.py; the C++ tests repeat them):
  seed(name) = sum((j + 1) * ord(c) for j, c in enumerate(name)) % 1009
  u(i, seed) = fmix32((i * 0x9E3779B1 + seed * 0x7F4A7C15 + 1) mod 2^32) / 2^32
  weights: dim >= 2: sqrt(6 / fan_in) * r; 1-d "weight": 1 + 0.2 r; bias: 0.1 r
           (r = 2 u(i, seed(name)) - 1), in float64 rounded to float32
  input x[i] = 2 u(i, 7) - 1, shape (2, 3, 300, 300)
  targets: image b has 2 + 3 b boxes; box k of image b, with v_j = u(8 k + j, S + b), S
           the first of 100, 110, ... without near-ties in the matching (metadata targets.seed):
           x1 = 240 v0, y1 = 240 v1, x2 = x1 + 12 + (288 - x1 - 12) v2,
           y2 = y1 + 12 + (288 - y1 - 12) v3, label = 1 + (7 k + 3 b) % 20
  loss.* head outputs: loc[i] = 2 u(i, 11) - 1 (2, 8732, 4),
                       conf[i] = 4 u(i, 13) - 2 (2, 8732, 21)
PyTorch computes the network in float64 on those float32 values.

Run: /usr/bin/python3 scripts/make_golden_det.py   (Debian's python3-torch and
python3-torchvision; about a minute on two cores)
"""
import json
import os
import sys

import numpy as np
import torch
from torchvision.models.detection import ssd300_vgg16
from torchvision.models.detection.anchor_utils import DefaultBoxGenerator
from torchvision.models.detection.image_list import ImageList
from torchvision.ops import nms

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_common import formula_weights, uniform, write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))




def formula(shape, s, lo, hi):
    v = lo + (hi - lo) * uniform(int(np.prod(shape)), s)
    return torch.from_numpy(v.astype(np.float32)).reshape(shape)


def formula_targets(images, base):
    targets = []
    for b in range(images):
        n = 2 + 3 * b
        v = uniform(8 * n, base + b).reshape(n, 8)
        x1 = 240.0 * v[:, 0]
        y1 = 240.0 * v[:, 1]
        x2 = x1 + 12.0 + (288.0 - x1 - 12.0) * v[:, 2]
        y2 = y1 + 12.0 + (288.0 - y1 - 12.0) * v[:, 3]
        boxes = torch.from_numpy(np.stack([x1, y1, x2, y2], 1).astype(np.float32))
        labels = torch.tensor([1 + (7 * k + 3 * b) % 20 for k in range(n)], dtype=torch.int64)
        targets.append({"boxes": boxes, "labels": labels})
    return targets


def ssd300_anchors():
    model = ssd300_vgg16(weights=None, weights_backbone=None, num_classes=21)
    x = torch.zeros(1, 3, 300, 300)
    with torch.no_grad():
        feats = list(model.backbone(x).values())
        return model.anchor_generator(ImageList(x, [(300, 300)]), feats)[0]


def safe_target_seed(anchors):
    """The first seed base whose targets match the same anchors in f32 and f64: no
    ground truth with two best anchors within 1e-5 of each other, no anchor's best
    IoU within 1e-5 of the 0.5 threshold (else f32 rounding could flip a match)."""
    from torchvision.ops import boxes as box_ops
    for base in range(100, 1000, 10):
        ok = True
        for t in formula_targets(2, base):
            for dt in (torch.float32, torch.float64):
                iou = box_ops.box_iou(t["boxes"].to(dt), anchors.to(dt))
                top2 = iou.topk(2, dim=1).values
                if ((top2[:, 0] - top2[:, 1]) < 1e-5 * top2[:, 0]).any():
                    ok = False
                if ((iou.max(dim=0).values - 0.5).abs() < 1e-5).any():
                    ok = False
        if ok:
            return base
    raise RuntimeError("no target seed without near-ties")


def sample(t):
    flat = t.reshape(-1)
    if flat.numel() <= 6000:
        return flat.clone()
    return flat[:: flat.numel() // 1024 + 1].clone()


def rows(t, k):
    """Every k-th row (default boxes are (A, 4))."""
    return t[::k].clone()


def ssd_loss(model, head_outputs, anchors, targets):
    matched = []
    for a, t in zip(anchors, targets):
        matched.append(model.proposal_matcher(model.box_iou(t["boxes"], a)))
    return model.compute_loss(targets, head_outputs, anchors, matched), matched


# ---------------------------------------------------------------- SSD300 network

def ssd300_goldens(out, meta, base):
    torch.manual_seed(0)
    model = ssd300_vgg16(weights=None, weights_backbone=None, num_classes=21)
    meta["ssd300.parameters"] = str(sum(p.numel() for p in model.parameters()))
    meta["ssd300.state_dict"] = json.dumps([[k, list(v.shape)] for k, v in model.state_dict().items()])
    from torchvision.ops import boxes as box_ops
    model.box_iou = box_ops.box_iou

    x = torch.zeros(2, 3, 300, 300)
    images = ImageList(x, [(300, 300)] * 2)
    with torch.no_grad():
        feats = list(model.backbone(x).values())
        anchors = model.anchor_generator(images, feats)
    out["ssd300.anchors_every7"] = rows(anchors[0], 7)
    out["ssd300.num_anchors"] = torch.tensor([float(anchors[0].shape[0])])

    with torch.no_grad():
        for name, t in model.state_dict().items():
            t.copy_(torch.from_numpy(formula_weights(name, t.shape)))
    model = model.double()
    x = formula((2, 3, 300, 300), 7, -1.0, 1.0).double()
    feats = list(model.backbone(x).values())
    head = model.head(feats)
    head["bbox_regression"].retain_grad()
    head["cls_logits"].retain_grad()
    anchors = [a.double() for a in anchors]
    targets = [{"boxes": t["boxes"].double(), "labels": t["labels"]} for t in formula_targets(2, base)]
    losses, matched = ssd_loss(model, head, anchors, targets)
    (losses["bbox_regression"] + losses["classification"]).backward()
    out["ssd300.loc"] = sample(head["bbox_regression"].detach())
    out["ssd300.conf"] = sample(head["cls_logits"].detach())
    out["ssd300.loss"] = torch.stack([losses["bbox_regression"], losses["classification"]]).detach()
    out["ssd300.grad.loc"] = sample(head["bbox_regression"].grad)
    out["ssd300.grad.conf"] = sample(head["cls_logits"].grad)
    params = dict(model.named_parameters())
    for name in ["backbone.scale_weight", "backbone.features.0.weight",
                 "backbone.features.21.weight", "backbone.extra.0.7.1.weight",
                 "backbone.extra.1.2.weight", "head.classification_head.module_list.0.weight",
                 "head.classification_head.module_list.2.bias",
                 "head.regression_head.module_list.1.weight"]:
        g = params[name].grad
        out["ssd300.grad." + name] = sample(g)
        out["ssd300.gradnorm." + name] = g.norm().reshape(1)


# ---------------------------------------------------------------- loss alone

def loss_goldens(out, base):
    """compute_loss on closed-form head outputs, in f64 (loss.*) and in f32 (loss32.*)."""
    model = ssd300_vgg16(weights=None, weights_backbone=None, num_classes=21)
    from torchvision.ops import boxes as box_ops
    model.box_iou = box_ops.box_iou
    anchors32 = ssd300_anchors()
    for prefix, dt in (("loss", torch.float64), ("loss32", torch.float32)):
        loc = formula((2, 8732, 4), 11, -1.0, 1.0).to(dt).requires_grad_()
        conf = formula((2, 8732, 21), 13, -2.0, 2.0).to(dt).requires_grad_()
        targets = [{"boxes": t["boxes"].to(dt), "labels": t["labels"]}
                   for t in formula_targets(2, base)]
        anchors = [anchors32.to(dt)] * 2
        losses, matched = ssd_loss(model, {"bbox_regression": loc, "cls_logits": conf}, anchors,
                                   targets)
        (losses["bbox_regression"] + losses["classification"]).backward()
        out[prefix + ".values"] = torch.stack([losses["bbox_regression"],
                                               losses["classification"]]).detach()
        # Matched anchors as (image, anchor, ground truth) rows.
        trip = [[b, a, int(g)] for b, m in enumerate(matched) for a, g in enumerate(m.tolist())
                if g >= 0]
        out[prefix + ".matches"] = torch.tensor(trip, dtype=torch.int32)
        out[prefix + ".grad.loc"] = sample(loc.grad)
        out[prefix + ".grad.conf"] = sample(conf.grad)
        out[prefix + ".gradnorm"] = torch.stack([loc.grad.norm(), conf.grad.norm()])


# ---------------------------------------------------------------- SSD512 anchors

def ssd512_goldens(out):
    gen = DefaultBoxGenerator([[2], [2, 3], [2, 3], [2, 3], [2, 3], [2], [2]],
                              scales=[s / 512.0 for s in [35, 76, 153, 230, 307, 384, 460, 537]],
                              steps=[8, 16, 32, 64, 128, 256, 512])
    x = torch.zeros(1, 3, 512, 512)
    feats = [torch.zeros(1, 1, s, s) for s in [64, 32, 16, 8, 4, 2, 1]]
    a = gen(ImageList(x, [(512, 512)]), feats)[0]
    out["ssd512.num_anchors"] = torch.tensor([float(a.shape[0])])
    out["ssd512.anchors_every13"] = rows(a, 13)


# ---------------------------------------------------------------- NMS

NMS_CASES = 1200
NMS_THRESHOLDS = [0.45, 0.3, 0.5, 0.7, 0.0, 0.9]


def nms_case(c):
    """Boxes (n, 4) and scores (n) of case c, float32 (see tests/engine/test_boxes.cpp)."""
    big = c % 50 == 49 - (c // 50) % 4  # 24 cases of 1,000 boxes, every mode
    n = 1000 if big else (c * 37) % 49
    mode = c % 4  # 0 plain, 1 tied scores, 2 grid boxes (identical, zero and negative area), 3 both
    v = uniform(8 * n, 1000 + c).reshape(n, 8)
    region = 150.0 if big else 100.0
    if mode >= 2:
        x1 = np.floor(v[:, 0] * 10.0) * 10.0
        y1 = np.floor(v[:, 1] * 10.0) * 10.0
        w = (np.floor(v[:, 2] * 5.0) - 1.0) * 10.0
        h = (np.floor(v[:, 3] * 5.0) - 1.0) * 10.0
    else:
        x1 = region * v[:, 0]
        y1 = region * v[:, 1]
        w = 5.0 + 40.0 * v[:, 2]
        h = 5.0 + 40.0 * v[:, 3]
        w = np.where(v[:, 5] < 0.05, 0.0, np.where(v[:, 5] > 0.95, -w, w))
    scores = np.floor(v[:, 4] * 5.0) / 5.0 if mode in (1, 3) else v[:, 4]
    boxes = np.stack([x1, y1, x1 + w, y1 + h], 1).astype(np.float32)
    return torch.from_numpy(boxes).reshape(n, 4), torch.from_numpy(scores.astype(np.float32))


def nms_goldens(out):
    keeps, offsets = [], [0]
    for c in range(NMS_CASES):
        boxes, scores = nms_case(c)
        thr = NMS_THRESHOLDS[(c // 4) % len(NMS_THRESHOLDS)]
        k = nms(boxes, scores, thr).tolist()
        keeps += k
        offsets.append(len(keeps))
    out["nms.keep"] = torch.tensor(keeps, dtype=torch.int32)
    out["nms.offsets"] = torch.tensor(offsets, dtype=torch.int32)


# ---------------------------------------------------------------- file

def save_safetensors(path, tensors, metadata):
    """Writes `tensors` (name -> torch tensor): int32 ones as they are, the rest as float32."""
    write_safetensors(path, {n: (t if t.dtype == torch.int32 else t.to(torch.float32)).detach().numpy()
                             for n, t in tensors.items()}, metadata)


def main():
    torch.set_num_threads(2)
    out_dir = os.path.join(ROOT, "tests", "data", "golden")
    nms_out = {}
    nms_goldens(nms_out)
    save_safetensors(os.path.join(out_dir, "det_nms.safetensors"), nms_out,
                     {"source": "scripts/make_golden_det.py", "torch": torch.__version__})
    base = safe_target_seed(ssd300_anchors())
    out = {}
    meta = {"source": "scripts/make_golden_det.py", "torch": torch.__version__,
            "targets.seed": str(base)}
    ssd512_goldens(out)
    loss_goldens(out, base)
    ssd300_goldens(out, meta, base)
    save_safetensors(os.path.join(out_dir, "det_ssd.safetensors"), out, meta)


if __name__ == "__main__":
    main()
