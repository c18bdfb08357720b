#include "support/winograd_bound.h"

#include <vector>

#include "engine/ops.h"

namespace tcv::testing {

namespace {

/// One of the kernels' algorithms as the magnitudes of its 1-D maps:
/// |Bᵀ| (N x In), |G| (N x 3), |Aᵀ| (Out x N); the weight gradient takes |A| =
/// |Aᵀ|ᵀ and |Gᵀ| = |G|ᵀ. A tile of Out x Out outputs at (y, x) reads the
/// In x In window at (y·num/den − pad_h, x·num/den − pad_w), taps d apart.
struct Algo {
  int n, in, out;
  double bt[5][5], g[5][3], at[4][5];
  int64_t num = 1, den = 1;
};

// F(2x2, 3x3), stride 1.
constexpr Algo kStride1{4,
                        4,
                        2,
                        {{1, 0, 1, 0}, {0, 1, 1, 0}, {0, 1, 1, 0}, {0, 1, 0, 1}},
                        {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}, {0, 0, 1}},
                        {{1, 1, 1, 0}, {0, 1, 1, 1}}};
// Stride 2, forward and weight gradient: even inputs by F(2, 2), odd ones direct.
constexpr Algo kStride2{
    5,
    5,
    2,
    {{1, 0, 1, 0, 0}, {0, 0, 1, 0, 0}, {0, 0, 1, 0, 1}, {0, 1, 0, 0, 0}, {0, 0, 0, 1, 0}},
    {{1, 0, 0}, {1, 0, 1}, {0, 0, 1}, {0, 1, 0}, {0, 1, 0}},
    {{1, 1, 0, 1, 0}, {0, 1, 1, 0, 1}},
    2};
// Stride 2, backward-data: 4x4 input gradients from the 3x3 window of dy at
// half their position, the taps unflipped.
constexpr Algo kStride2Data{5,
                            3,
                            4,
                            {{1, 1, 0}, {0, 1, 0}, {0, 1, 1}, {1, 0, 0}, {0, 1, 0}},
                            {{0, 0, 1}, {1, 0, 1}, {1, 0, 0}, {0, 1, 0}, {0, 1, 0}},
                            {{0, 0, 0, 1, 0}, {1, 1, 0, 0, 0}, {0, 0, 0, 0, 1}, {0, 1, 1, 0, 0}},
                            1,
                            2};

/// An output tile: image, first row and column; its outputs are d apart.
struct TileAt {
  int64_t img, y, x;
};

/// The tiles of (n, oh, ow) outputs dilated by d: per phase (y mod d_h,
/// x mod d_w), tiles out·d apart.
std::vector<TileAt> tiles_of(int64_t n, int64_t oh, int64_t ow, const Dilation& d, int out) {
  std::vector<TileAt> tiles;
  for (int64_t img = 0; img < n; ++img)
    for (int64_t py = 0; py < d.h; ++py)
      for (int64_t px = 0; px < d.w; ++px)
        for (int64_t y = py; y < oh; y += out * d.h)
          for (int64_t x = px; x < ow; x += out * d.w) tiles.push_back({img, y, x});
  return tiles;
}

/// |Bᵀ| |d| |B| of each tile's input window: (N², tiles, c).
Tensor input_magnitudes(const Algo& a, const Tensor& x, const std::vector<TileAt>& at,
                        int64_t pad_h, int64_t pad_w, const Dilation& dil) {
  const int64_t c = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t tiles = static_cast<int64_t>(at.size());
  const double* xp = x.data<double>();
  Tensor v = zeros({a.n * a.n, tiles, c}, {.dtype = DType::f64});
  double* vp = v.data<double>();
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t img = at[t].img, y0 = at[t].y * a.num / a.den - pad_h,
                  x0 = at[t].x * a.num / a.den - pad_w;
    for (int64_t ch = 0; ch < c; ++ch) {
      double d[5][5] = {};
      for (int i = 0; i < a.in; ++i)
        for (int j = 0; j < a.in; ++j) {
          const int64_t yy = y0 + i * dil.h, xx = x0 + j * dil.w;
          if (yy >= 0 && yy < h && xx >= 0 && xx < wd)
            d[i][j] = xp[((img * c + ch) * h + yy) * wd + xx];
        }
      for (int p = 0; p < a.n; ++p)
        for (int q = 0; q < a.n; ++q) {
          double s = 0;
          for (int i = 0; i < a.in; ++i)
            for (int j = 0; j < a.in; ++j) s += a.bt[p][i] * d[i][j] * a.bt[q][j];
          vp[((p * a.n + q) * tiles + t) * c + ch] = s;
        }
    }
  }
  return v;
}

/// M of a forward pass by `a`: |x| (n, c, h, w), |w| (k, c, 3, 3) in the
/// layout `a`'s G takes, outputs (n, k, oh, ow).
Tensor magnitudes(const Algo& a, const Tensor& abs_x, const Tensor& abs_w, int64_t pad_h,
                  int64_t pad_w, const Dilation& dil, int64_t oh, int64_t ow) {
  const Tensor x = abs_x.to(DType::f64).contiguous(), w = abs_w.to(DType::f64).contiguous();
  const int64_t n = x.size(0), c = x.size(1), k = w.size(0), P = a.n * a.n;
  const std::vector<TileAt> at = tiles_of(n, oh, ow, dil, a.out);
  const int64_t tiles = static_cast<int64_t>(at.size());
  const double* wp = w.data<double>();
  const Tensor v = input_magnitudes(a, x, at, pad_h, pad_w, dil);
  // |G| |g| |Gᵀ| per position: (N², c, k).
  Tensor u = zeros({P, c, k}, {.dtype = DType::f64});
  double* up = u.data<double>();
  for (int64_t o = 0; o < k; ++o)
    for (int64_t ch = 0; ch < c; ++ch) {
      const double* g = wp + (o * c + ch) * 9;
      for (int p = 0; p < a.n; ++p)
        for (int q = 0; q < a.n; ++q) {
          double s = 0;
          for (int r = 0; r < 3; ++r)
            for (int t = 0; t < 3; ++t) s += a.g[p][r] * g[r * 3 + t] * a.g[q][t];
          up[((p * a.n + q) * c + ch) * k + o] = s;
        }
    }
  // The channel sums, then |Aᵀ| m |A| into the outputs.
  const Tensor m = ops::matmul(v, u).contiguous();  // (N², tiles, k)
  const double* mp = m.data<double>();
  Tensor out = zeros({n, k, oh, ow}, {.dtype = DType::f64});
  double* op = out.data<double>();
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t img = at[t].img, y0 = at[t].y, x0 = at[t].x;
    for (int64_t o = 0; o < k; ++o)
      for (int i = 0; i < a.out && y0 + i * dil.h < oh; ++i)
        for (int j = 0; j < a.out && x0 + j * dil.w < ow; ++j) {
          double s = 0;
          for (int p = 0; p < a.n; ++p)
            for (int q = 0; q < a.n; ++q)
              s += a.at[i][p] * mp[((p * a.n + q) * tiles + t) * k + o] * a.at[j][q];
          op[((img * k + o) * oh + y0 + i * dil.h) * ow + x0 + j * dil.w] = s;
        }
  }
  return out;
}

/// M of the weight gradient by `a`: Σ_tiles |Gᵀ|[(|A| |h| |Aᵀ|) ⊙ (|Bᵀ| |d| |B|)]|G|.
Tensor weight_magnitudes(const Algo& a, const Tensor& abs_x, const Tensor& abs_dy, int64_t pad_h,
                         int64_t pad_w, const Dilation& dil) {
  const Tensor x = abs_x.to(DType::f64).contiguous(), dy = abs_dy.to(DType::f64).contiguous();
  const int64_t c = x.size(1), k = dy.size(1), oh = dy.size(2), ow = dy.size(3), P = a.n * a.n;
  const std::vector<TileAt> at = tiles_of(x.size(0), oh, ow, dil, a.out);
  const int64_t tiles = static_cast<int64_t>(at.size());
  const Tensor v = input_magnitudes(a, x, at, pad_h, pad_w, dil);  // (N², tiles, c)
  // |A| |h| |Aᵀ| of each tile's output gradients: (N², tiles, k).
  Tensor hm = zeros({P, tiles, k}, {.dtype = DType::f64});
  const double* dp = dy.data<double>();
  double* hp = hm.data<double>();
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t img = at[t].img, y0 = at[t].y, x0 = at[t].x;
    for (int64_t o = 0; o < k; ++o) {
      double h[4][4] = {};
      for (int i = 0; i < a.out && y0 + i * dil.h < oh; ++i)
        for (int j = 0; j < a.out && x0 + j * dil.w < ow; ++j)
          h[i][j] = dp[((img * k + o) * oh + y0 + i * dil.h) * ow + x0 + j * dil.w];
      for (int p = 0; p < a.n; ++p)
        for (int q = 0; q < a.n; ++q) {
          double s = 0;
          for (int i = 0; i < a.out; ++i)
            for (int j = 0; j < a.out; ++j) s += a.at[i][p] * h[i][j] * a.at[j][q];
          hp[((p * a.n + q) * tiles + t) * k + o] = s;
        }
    }
  }
  // The sums over tiles, then |Gᵀ| m |G| into the taps.
  const Tensor m = ops::matmul(hm.permute({0, 2, 1}), v).contiguous();  // (N², k, c)
  const double* mp = m.data<double>();
  Tensor out = zeros({k, c, 3, 3}, {.dtype = DType::f64});
  double* op = out.data<double>();
  for (int64_t o = 0; o < k; ++o)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 3; ++q) {
          double sum = 0;
          for (int p = 0; p < a.n; ++p)
            for (int s = 0; s < a.n; ++s)
              sum += a.g[p][r] * mp[((p * a.n + s) * k + o) * c + ch] * a.g[s][q];
          op[((o * c + ch) * 3 + r) * 3 + q] = sum;
        }
  return out;
}

/// w'(c, k, r, s) = w(k, c, r, s), flipped (w(k, c, 2 − r, 2 − s)) or not.
Tensor transposed(const Tensor& abs_w, bool flip) {
  const Tensor w = abs_w.to(DType::f64).contiguous();
  const int64_t k = w.size(0), c = w.size(1);
  Tensor out = zeros({c, k, 3, 3}, {.dtype = DType::f64});
  const double* src = w.data<double>();
  double* dst = out.data<double>();
  for (int64_t o = 0; o < k; ++o)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int r = 0; r < 9; ++r)
        dst[(ch * k + o) * 9 + (flip ? 8 - r : r)] = src[(o * c + ch) * 9 + r];
  return out;
}

}  // namespace

Tensor winograd2_magnitudes(const Tensor& abs_x, const Tensor& abs_w, int64_t pad_h, int64_t pad_w,
                            Dilation dil) {
  const int64_t oh = abs_x.size(2) + 2 * pad_h - 2 * dil.h,
                ow = abs_x.size(3) + 2 * pad_w - 2 * dil.w;
  return magnitudes(kStride1, abs_x, abs_w, pad_h, pad_w, dil, oh, ow);
}

Tensor winograd2_magnitudes_backward_data(const Tensor& abs_dy, const Tensor& abs_w, int64_t pad_h,
                                          int64_t pad_w, Dilation dil) {
  return winograd2_magnitudes(abs_dy, transposed(abs_w, true), 2 * dil.h - pad_h, 2 * dil.w - pad_w,
                              dil);
}

int64_t winograd2_tiles(int64_t n, int64_t oh, int64_t ow, Dilation dil) {
  return static_cast<int64_t>(tiles_of(n, oh, ow, dil, 2).size());
}

Tensor winograd2_magnitudes_backward_weights(const Tensor& abs_x, const Tensor& abs_dy,
                                             int64_t pad_h, int64_t pad_w, Dilation dil) {
  return weight_magnitudes(kStride1, abs_x, abs_dy, pad_h, pad_w, dil);
}

Tensor winograd2_stride2_magnitudes(const Tensor& abs_x, const Tensor& abs_w) {
  return magnitudes(kStride2, abs_x, abs_w, 1, 1, {}, (abs_x.size(2) + 1) / 2,
                    (abs_x.size(3) + 1) / 2);
}

Tensor winograd2_stride2_magnitudes_backward_data(const Tensor& abs_dy, const Tensor& abs_w,
                                                  int64_t h, int64_t w) {
  return magnitudes(kStride2Data, abs_dy, transposed(abs_w, false), 0, 0, {}, h, w);
}

Tensor winograd2_stride2_magnitudes_backward_weights(const Tensor& abs_x, const Tensor& abs_dy) {
  return weight_magnitudes(kStride2, abs_x, abs_dy, 1, 1, {});
}

}  // namespace tcv::testing
