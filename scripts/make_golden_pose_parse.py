#!/usr/bin/env python3
"""Golden people for tcv's pose parsing (tests/models/test_pose_parse.cpp).

Draws OpenPose-style maps (64x80) for a scene of stick figures: Gaussian
heatmaps at the keypoints (maximum over people) and unit-vector PAFs along the
limbs (mean over people), plus distractor blobs, a stray PAF segment and
uniform noise from a 64-bit LCG, each value computed in f64 and rounded to f32.
The C++ test draws the same maps from the scene this script writes.

The maps are parsed by a numpy port of TorchCV's OpenPose test
(runner/pose/open_pose_test.py: __extract_heatmap_info, __extract_paf_info,
__get_subsets, __get_info_tree), with one change that tcv makes on purpose:
peaks are local maxima of the 3x3 window (TorchCV compares 4 neighbours).
The scene exercises what the assembly does: people missing parts, a person
without a nose whose head subsets merge into the body, people close enough for
cross-candidates, and spurious peaks. Output: tests/data/golden/pose_parse.json.

numpy and scipy (gaussian_filter) come from PyPI in a virtual environment used
only for this script:

    python3 -m venv --system-site-packages ~/.cache/tcv/pose-ref
    ~/.cache/tcv/pose-ref/bin/pip install numpy scipy
    ~/.cache/tcv/pose-ref/bin/python scripts/make_golden_pose_parse.py
"""
import json
import math
import os

import numpy as np
from scipy.ndimage import gaussian_filter

HERE = os.path.dirname(os.path.abspath(__file__))
H, W = 64, 80
SIGMA = 2.0        # heatmap blobs
PAF_WIDTH = 1.5    # half-width of a limb's PAF
NOISE = 0.04       # uniform noise amplitude
SEED = 20241201
# TorchCV's limb_seq, 0-based, and mini_tree.
LIMBS = [[2, 3], [3, 4], [5, 6], [6, 7], [8, 9], [9, 10], [11, 12], [12, 13], [0, 1], [1, 8],
         [1, 11], [1, 2], [1, 5], [0, 15], [0, 14], [15, 17], [14, 16], [2, 16], [5, 17]]
ORDER = [11, 12, 0, 1, 2, 3, 9, 4, 5, 10, 6, 7, 8, 14, 16, 13, 15, 17, 18]
TEMPLATE = [[0, -14], [0, -9], [-4, -9], [-6, -3], [-7, 3], [4, -9], [6, -3], [7, 3], [-3, 3],
            [-3, 10], [-3, 17], [3, 3], [3, 10], [3, 17], [-2, -16], [2, -16], [-4, -15],
            [4, -15]]
# res.* as TorchCV's config
PART_THR, LIMB_THR, MID, POS_RATIO, MIN_PARTS, MIN_MEAN = 0.1, 0.05, 10, 0.8, 3, 0.2


def figure(cx, cy, s, missing=()):
    return [None if k in missing else [float(round(cx + s * t[0])), float(round(cy + s * t[1]))]
            for k, t in enumerate(TEMPLATE)]


def scene():
    people = [figure(12, 30, 1.0),
              figure(30, 32, 1.1, missing=(0,)),         # no nose: head merges into the body
              figure(47, 30, 0.9, missing=(6, 7, 13)),   # no left arm end, no left ankle
              figure(66, 34, 1.2, missing=(1,))]         # no neck: two halves
    blobs = [[75.0, 5.0, 4], [3.0, 60.0, 9], [40.0, 58.0, 0]]  # (x, y, keypoint)
    stray = [[20.0, 55.0, 35.0, 60.0, 3]]  # a PAF segment (x0, y0, x1, y1, limb) with no people
    return people, blobs, stray


class Lcg:
    def __init__(self, seed):
        self.s = seed & (2**64 - 1)

    def uniform(self):  # in [-1, 1)
        self.s = (self.s * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
        return (self.s >> 11) * 2.0**-53 * 2 - 1


def draw(people, blobs, stray):
    hm = np.zeros((19, H, W))
    paf = np.zeros((38, H, W))
    cnt = np.zeros((19, H, W))
    ys, xs = np.mgrid[0:H, 0:W].astype(np.float64)

    def blob(k, x, y):
        g = np.exp(-((xs - x) ** 2 + (ys - y) ** 2) / (2 * SIGMA * SIGMA))
        hm[k] = np.maximum(hm[k], g)

    def segment(l, a, b):
        vx, vy = b[0] - a[0], b[1] - a[1]
        n = math.sqrt(vx * vx + vy * vy)
        ux, uy = vx / n, vy / n
        px, py = xs - a[0], ys - a[1]
        along = px * ux + py * uy
        across = np.abs(px * uy - py * ux)
        on = (along >= -1) & (along <= n + 1) & (across <= PAF_WIDTH)
        paf[2 * l][on] += ux
        paf[2 * l + 1][on] += uy
        cnt[l][on] += 1

    for p in people:
        for k, q in enumerate(p):
            if q is not None:
                blob(k, q[0], q[1])
        for l, (a, b) in enumerate(LIMBS):
            if p[a] is not None and p[b] is not None:
                segment(l, p[a], p[b])
    for x, y, k in blobs:
        blob(k, x, y)
    for x0, y0, x1, y1, l in stray:
        segment(l, [x0, y0], [x1, y1])
    for l in range(19):
        many = cnt[l] > 1
        paf[2 * l][many] /= cnt[l][many]
        paf[2 * l + 1][many] /= cnt[l][many]
    hm[18] = 1 - hm[:18].max(axis=0)
    rng = Lcg(SEED)
    for arr in (hm, paf):
        flat = arr.reshape(-1)
        for i in range(flat.size):
            flat[i] += NOISE * rng.uniform()
    return hm.astype(np.float32), paf.astype(np.float32)


def peaks_of(hm):
    all_peaks, counter = [], 0
    for k in range(18):
        ori = hm[k].astype(np.float64)
        g = gaussian_filter(ori, sigma=3)
        pad = np.pad(g, 1, constant_values=-np.inf)
        ok = g > PART_THR
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                if dy or dx:
                    ok &= g >= pad[1 + dy:1 + dy + H, 1 + dx:1 + dx + W]
        yy, xx = np.nonzero(ok)
        peaks = [(int(x), int(y), float(ori[y, x]), counter + i) for i, (x, y) in
                 enumerate(zip(xx, yy))]
        counter += len(peaks)
        all_peaks.append(peaks)
    return all_peaks


def connections(paf, all_peaks):
    conns, special = [], []
    for k, (ia, ib) in enumerate(LIMBS):
        A, B = all_peaks[ia], all_peaks[ib]
        if not A or not B:
            special.append(k)
            conns.append([])
            continue
        cands = []
        for i, a in enumerate(A):
            for j, b in enumerate(B):
                vec = np.subtract(b[:2], a[:2])
                norm = math.sqrt(vec[0] * vec[0] + vec[1] * vec[1]) + 1e-9
                vec = vec / norm
                pts = list(zip(np.linspace(a[0], b[0], num=MID), np.linspace(a[1], b[1], num=MID)))
                vx = np.array([paf[2 * k][int(round(p[1])), int(round(p[0]))] for p in pts],
                              dtype=np.float64)
                vy = np.array([paf[2 * k + 1][int(round(p[1])), int(round(p[0]))] for p in pts],
                              dtype=np.float64)
                mid = vx * vec[0] + vy * vec[1]
                score = sum(mid) / len(mid) + min(0.5 * H / norm - 1, 0)
                c1 = len(np.nonzero(mid > LIMB_THR)[0]) > int(POS_RATIO * len(mid))
                if c1 and score > 0:
                    cands.append([i, j, score])
        cands = sorted(cands, key=lambda c: c[2], reverse=True)
        conn = np.zeros((0, 5))
        for i, j, s in cands:
            if i not in conn[:, 3] and j not in conn[:, 4]:
                conn = np.vstack([conn, [A[i][3], B[j][3], s, i, j]])
                if len(conn) >= min(len(A), len(B)):
                    break
        conns.append(conn)
    return conns, special


def subsets_of(conns, special, all_peaks):
    subset = -1 * np.ones((0, 20))
    cand = np.array([p for ps in all_peaks for p in ps])
    for k in ORDER:
        if k in special:
            continue
        pa, pb = conns[k][:, 0], conns[k][:, 1]
        ia, ib = LIMBS[k]
        for i in range(len(conns[k])):
            found, idx = 0, [-1, -1]
            for j in range(len(subset)):
                if subset[j][ia] == pa[i] or subset[j][ib] == pb[i]:
                    idx[found] = j
                    found += 1
            if found == 1:
                j = idx[0]
                if subset[j][ib] != pb[i]:
                    subset[j][ib] = pb[i]
                    subset[j][-1] += 1
                    subset[j][-2] += cand[int(pb[i]), 2] + conns[k][i][2]
            elif found == 2:
                j1, j2 = idx
                member = ((subset[j1] >= 0).astype(int) + (subset[j2] >= 0).astype(int))[:-2]
                if len(np.nonzero(member == 2)[0]) == 0:
                    subset[j1][:-2] += subset[j2][:-2] + 1
                    subset[j1][-2:] += subset[j2][-2:]
                    subset[j1][-2] += conns[k][i][2]
                    subset = np.delete(subset, j2, 0)
                else:
                    subset[j1][ib] = pb[i]
                    subset[j1][-1] += 1
                    subset[j1][-2] += cand[int(pb[i]), 2] + conns[k][i][2]
            elif not found:
                row = -1 * np.ones(20)
                row[ia], row[ib] = pa[i], pb[i]
                row[-1] = 2
                row[-2] = sum(cand[conns[k][i, :2].astype(int), 2]) + conns[k][i][2]
                subset = np.vstack([subset, row])
    people = []
    for s in subset:
        if s[-1] < MIN_PARTS or s[-2] / s[-1] < MIN_MEAN:
            continue
        kps = []
        for k in range(18):
            if s[k] == -1:
                kps.append(None)
            else:
                c = cand[int(s[k])]
                kps.append([float(c[0]), float(c[1]), float(c[2])])
        people.append({"keypoints": kps, "score": float(s[-2]), "parts": int(s[-1])})
    return people


def main():
    people, blobs, stray = scene()
    hm, paf = draw(people, blobs, stray)
    all_peaks = peaks_of(hm)
    conns, special = connections(paf, all_peaks)
    parsed = subsets_of(conns, special, all_peaks)
    out = {"generator": "scripts/make_golden_pose_parse.py",
           "size": [H, W], "sigma": SIGMA, "paf_width": PAF_WIDTH, "noise": NOISE, "seed": SEED,
           "people": people, "blobs": blobs, "stray": stray,
           "peaks": [len(p) for p in all_peaks], "parsed": parsed}
    path = os.path.join(HERE, "..", "tests", "data", "golden", "pose_parse.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("peaks per keypoint", out["peaks"])
    for p in parsed:
        print(p["parts"], round(p["score"], 4), [k[:2] if k else None for k in p["keypoints"]])


if __name__ == "__main__":
    main()
