#!/usr/bin/env python3
"""Why the default Winograd tile is 2x2: the f32 rounding error of the 3x3
stride-1 forward pass by direct summation and by Winograd F(m x m, 3x3) for
m = 2, 3, 4 (Toom-Cook on the given points and infinity), on random layers,
against f64 on the same f32 inputs. A model of tcv's kernels in numpy: input
and output transforms in f32 (each 1-D pass rounded), filters transformed in
f64 and rounded once, each position's products summed over the channels in f32.

Prints per layer and algorithm: max|e| / max|y| (what a user comparing with
another library sees), then the mean and the largest of |e| / (u * sum|terms|),
u = 2^-24, the measure of docs/conv_accuracy.md.

    /usr/bin/python3 bench/compare/winograd_tile_error.py [--seed 0] [--reps 3]
"""
import argparse
from fractions import Fraction as Fr

import numpy as np

F32 = np.float32


def toom_cook(m, points):
    """(Aᵀ, G, Bᵀ) of F(m, 3) on `points` (m + 1 of them) and infinity, as
    exact fractions: y = Aᵀ [(G g) ⊙ (Bᵀ d)] for the correlation
    y[i] = Σ_k g[k] d[i + k]. Bᵀ solves that identity (least squares in f64,
    then recovered as fractions and checked exactly)."""
    n = m + 2
    pts = [Fr(p) for p in points]
    assert len(pts) == n - 1
    at = [[p ** i for p in pts] + [Fr(int(i == m - 1))] for i in range(m)]
    g = []
    for j, p in enumerate(pts):
        f = Fr(1)
        for q in pts[:j] + pts[j + 1:]:
            f *= p - q
        g.append([p ** k / f for k in range(3)])
    g.append([Fr(0), Fr(0), Fr(1)])
    # Σ_j Aᵀ[i][j] G[j][k] Bᵀ[j][l] = [l == i + k]: one row per (i, k), per l.
    coef = np.array([[float(at[i][j] * g[j][k]) for j in range(n)]
                     for i in range(m) for k in range(3)])
    rhs = np.array([[float(l == i + k) for l in range(n)] for i in range(m) for k in range(3)])
    sol = np.linalg.lstsq(coef, rhs, rcond=None)[0]
    bt = [[Fr(float(v)).limit_denominator(1024) for v in row] for row in sol]
    for i in range(m):
        for k in range(3):
            for l in range(n):
                assert sum(at[i][j] * g[j][k] * bt[j][l] for j in range(n)) == int(l == i + k)
    return at, g, bt


def as_array(rows, dtype):
    return np.array([[float(v) for v in r] for r in rows], dtype=dtype)


def winograd(x, w, m, points):
    """The valid 3x3 correlation of x [C, H, W] with w [K, C, 3, 3], in f32 by F(m x m, 3x3)."""
    at, g, bt = toom_cook(m, points)
    n = m + 2
    at32, bt32, g64 = as_array(at, F32), as_array(bt, F32), as_array(g, np.float64)
    u = np.einsum("ar,kcrs,bs->abkc", g64, w.astype(np.float64), g64).astype(F32)
    c, h, wd = x.shape
    oh, ow = h - 2, wd - 2
    th, tw = -(-oh // m), -(-ow // m)
    xp = np.zeros((c, th * m + 2, tw * m + 2), F32)
    xp[:, :h, :wd] = x
    tiles = np.empty((c, th, tw, n, n), F32)
    for i in range(th):
        for j in range(tw):
            tiles[:, i, j] = xp[:, i * m:i * m + n, j * m:j * m + n]
    v = np.einsum("ai,ctuij->ctuaj", bt32, tiles).astype(F32)
    v = np.einsum("ctuaj,bj->ctuab", v, bt32).astype(F32)
    prod = np.empty((n, n, w.shape[0], th, tw), F32)
    for a in range(n):
        for b in range(n):
            prod[a, b] = (u[a, b] @ v[:, :, :, a, b].reshape(c, -1)).reshape(-1, th, tw)
    y = np.einsum("ia,abktu->ibktu", at32, prod).astype(F32)
    y = np.einsum("ibktu,jb->ktiuj", y, at32).astype(F32)
    return y.reshape(w.shape[0], th * m, tw * m)[:, :oh, :ow]


def direct(x, w, dtype):
    """The same correlation as one matrix product in `dtype`."""
    c, h, wd = x.shape
    oh, ow = h - 2, wd - 2
    cols = np.empty((c, 3, 3, oh, ow), dtype)
    for r in range(3):
        for s in range(3):
            cols[:, r, s] = x[:, r:r + oh, s:s + ow]
    k = w.shape[0]
    return (w.reshape(k, -1).astype(dtype) @ cols.reshape(c * 9, -1)).reshape(k, oh, ow)


ALGOS = {
    "direct": None,
    "F(2x2) 0,±1": (2, [0, 1, -1]),
    "F(3x3) 0,±1,2": (3, [0, 1, -1, 2]),
    "F(3x3) 0,±1,1/2": (3, [0, 1, -1, Fr(1, 2)]),
    "F(4x4) 0,±1,±2": (4, [0, 1, -1, 2, -2]),
    "F(4x4) 0,±1,±1/2": (4, [0, 1, -1, Fr(1, 2), Fr(-1, 2)]),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reps", type=int, default=3, help="layers per row (medians printed)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print("| channels @ map | x | " + " | ".join(ALGOS) + " |")
    print("|---|---|" + "---|" * len(ALGOS))
    for c, k, size in ((64, 16, 32), (256, 16, 8), (512, 8, 8)):
        for relu in (False, True):
            res = {name: [] for name in ALGOS}
            for _ in range(args.reps):
                x = rng.standard_normal((c, size + 2, size + 2)).astype(F32)
                if relu:
                    x = np.maximum(x, 0)
                x[:, [0, -1], :] = 0  # padding 1
                x[:, :, [0, -1]] = 0
                w = (rng.standard_normal((k, c, 3, 3)) * np.sqrt(2 / (9 * c))).astype(F32)
                ref = direct(x.astype(np.float64), w.astype(np.float64), np.float64)
                terms = direct(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64),
                               np.float64) * 2.0 ** -24
                for name, algo in ALGOS.items():
                    y = direct(x, w, F32) if algo is None else winograd(x, w, *algo)
                    e = np.abs(y.astype(np.float64) - ref)
                    res[name].append((e.max() / np.abs(ref).max(), (e / terms).mean(),
                                      (e / terms).max()))
            cells = []
            for name in ALGOS:
                a, mean, worst = np.median(np.array(res[name]), axis=0)
                cells.append(f"{a:.1e}; {mean:.2f}, {worst:.1f}")
            print(f"| {c} @ {size} | {'relu(N(0,1))' if relu else 'N(0,1)'} | "
                  + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
