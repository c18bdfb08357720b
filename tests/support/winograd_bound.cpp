#include "support/winograd_bound.h"

#include <vector>

#include "engine/ops.h"

namespace tcv::testing {

namespace {

// |Bᵀ|, |G| and |Aᵀ| of F(2x2, 3x3).
constexpr double kBt[4][4] = {{1, 0, 1, 0}, {0, 1, 1, 0}, {0, 1, 1, 0}, {0, 1, 0, 1}};
constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}, {0, 0, 1}};
constexpr double kAt[2][4] = {{1, 1, 1, 0}, {0, 1, 1, 1}};
// |Gᵀ| and |A| of F(3x3, 2x2), the weight gradient's.
constexpr double kGt[3][4] = {{1, 0.5, 0.5, 0}, {0, 0.5, 0.5, 0}, {0, 0.5, 0.5, 1}};
constexpr double kA[4][2] = {{1, 0}, {1, 1}, {1, 1}, {0, 1}};

/// A 2x2 output tile: image, first row and column; its outputs are d apart.
struct TileAt {
  int64_t img, y, x;
};

/// The tiles of (n, oh, ow) outputs dilated by d: per phase (y mod d_h,
/// x mod d_w), tiles 2·d apart.
std::vector<TileAt> tiles_of(int64_t n, int64_t oh, int64_t ow, const Dilation& d) {
  std::vector<TileAt> tiles;
  for (int64_t img = 0; img < n; ++img)
    for (int64_t py = 0; py < d.h; ++py)
      for (int64_t px = 0; px < d.w; ++px)
        for (int64_t y = py; y < oh; y += 2 * d.h)
          for (int64_t x = px; x < ow; x += 2 * d.w) tiles.push_back({img, y, x});
  return tiles;
}

/// |Bᵀ| |d| |B| of each 2x2 output tile's 4x4 input window: (16, tiles, c).
Tensor input_magnitudes(const Tensor& x, const std::vector<TileAt>& at, int64_t pad_h,
                        int64_t pad_w, const Dilation& dil) {
  const int64_t c = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t tiles = static_cast<int64_t>(at.size());
  const double* xp = x.data<double>();
  Tensor v = zeros({16, tiles, c}, {.dtype = DType::f64});
  double* vp = v.data<double>();
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t img = at[t].img, y0 = at[t].y - pad_h, x0 = at[t].x - pad_w;
    for (int64_t ch = 0; ch < c; ++ch) {
      double d[4][4] = {};
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          const int64_t yy = y0 + i * dil.h, xx = x0 + j * dil.w;
          if (yy >= 0 && yy < h && xx >= 0 && xx < wd)
            d[i][j] = xp[((img * c + ch) * h + yy) * wd + xx];
        }
      for (int a = 0; a < 4; ++a)
        for (int b = 0; b < 4; ++b) {
          double s = 0;
          for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 4; ++j) s += kBt[a][i] * d[i][j] * kBt[b][j];
          vp[((a * 4 + b) * tiles + t) * c + ch] = s;
        }
    }
  }
  return v;
}

}  // namespace

Tensor winograd2_magnitudes(const Tensor& abs_x, const Tensor& abs_w, int64_t pad_h, int64_t pad_w,
                            Dilation dil) {
  const Tensor x = abs_x.to(DType::f64).contiguous(), w = abs_w.to(DType::f64).contiguous();
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3), k = w.size(0);
  const int64_t oh = h + 2 * pad_h - 2 * dil.h, ow = wd + 2 * pad_w - 2 * dil.w;
  const std::vector<TileAt> at = tiles_of(n, oh, ow, dil);
  const int64_t tiles = static_cast<int64_t>(at.size());
  const double* wp = w.data<double>();
  const Tensor v = input_magnitudes(x, at, pad_h, pad_w, dil);
  // |G| |g| |Gᵀ| per position: (16, c, k).
  Tensor u = zeros({16, c, k}, {.dtype = DType::f64});
  double* up = u.data<double>();
  for (int64_t o = 0; o < k; ++o)
    for (int64_t ch = 0; ch < c; ++ch) {
      const double* g = wp + (o * c + ch) * 9;
      for (int a = 0; a < 4; ++a)
        for (int b = 0; b < 4; ++b) {
          double s = 0;
          for (int r = 0; r < 3; ++r)
            for (int q = 0; q < 3; ++q) s += kG[a][r] * g[r * 3 + q] * kG[b][q];
          up[((a * 4 + b) * c + ch) * k + o] = s;
        }
    }
  // The channel sums, then |Aᵀ| m |A| into the outputs.
  const Tensor m = ops::matmul(v, u).contiguous();  // (16, tiles, k)
  const double* mp = m.data<double>();
  Tensor out = zeros({n, k, oh, ow}, {.dtype = DType::f64});
  double* op = out.data<double>();
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t img = at[t].img, y0 = at[t].y, x0 = at[t].x;
    for (int64_t o = 0; o < k; ++o)
      for (int i = 0; i < 2 && y0 + i * dil.h < oh; ++i)
        for (int j = 0; j < 2 && x0 + j * dil.w < ow; ++j) {
          double s = 0;
          for (int a = 0; a < 4; ++a)
            for (int b = 0; b < 4; ++b)
              s += kAt[i][a] * mp[((a * 4 + b) * tiles + t) * k + o] * kAt[j][b];
          op[((img * k + o) * oh + y0 + i * dil.h) * ow + x0 + j * dil.w] = s;
        }
  }
  return out;
}

Tensor winograd2_magnitudes_backward_data(const Tensor& abs_dy, const Tensor& abs_w, int64_t pad_h,
                                          int64_t pad_w, Dilation dil) {
  // w'(c, k, r, s) = w(k, c, 2 − r, 2 − s).
  const Tensor w = abs_w.to(DType::f64).contiguous();
  const int64_t k = w.size(0), c = w.size(1);
  Tensor flipped = zeros({c, k, 3, 3}, {.dtype = DType::f64});
  const double* src = w.data<double>();
  double* dst = flipped.data<double>();
  for (int64_t o = 0; o < k; ++o)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int r = 0; r < 9; ++r) dst[(ch * k + o) * 9 + 8 - r] = src[(o * c + ch) * 9 + r];
  return winograd2_magnitudes(abs_dy, flipped, 2 * dil.h - pad_h, 2 * dil.w - pad_w, dil);
}

int64_t winograd2_tiles(int64_t n, int64_t oh, int64_t ow, Dilation dil) {
  return static_cast<int64_t>(tiles_of(n, oh, ow, dil).size());
}

Tensor winograd2_magnitudes_backward_weights(const Tensor& abs_x, const Tensor& abs_dy,
                                             int64_t pad_h, int64_t pad_w, Dilation dil) {
  const Tensor x = abs_x.to(DType::f64).contiguous(), dy = abs_dy.to(DType::f64).contiguous();
  const int64_t c = x.size(1), k = dy.size(1), oh = dy.size(2), ow = dy.size(3);
  const std::vector<TileAt> at = tiles_of(x.size(0), oh, ow, dil);
  const int64_t tiles = static_cast<int64_t>(at.size());
  const Tensor v = input_magnitudes(x, at, pad_h, pad_w, dil);  // (16, tiles, c)
  // |A| |h| |Aᵀ| of each tile's 2x2 gradients: (16, tiles, k).
  Tensor hm = zeros({16, tiles, k}, {.dtype = DType::f64});
  const double* dp = dy.data<double>();
  double* hp = hm.data<double>();
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t img = at[t].img, y0 = at[t].y, x0 = at[t].x;
    for (int64_t o = 0; o < k; ++o) {
      double h[2][2] = {};
      for (int i = 0; i < 2 && y0 + i * dil.h < oh; ++i)
        for (int j = 0; j < 2 && x0 + j * dil.w < ow; ++j)
          h[i][j] = dp[((img * k + o) * oh + y0 + i * dil.h) * ow + x0 + j * dil.w];
      for (int a = 0; a < 4; ++a)
        for (int b = 0; b < 4; ++b)
          hp[((a * 4 + b) * tiles + t) * k + o] =
              kA[a][0] * (h[0][0] * kA[b][0] + h[0][1] * kA[b][1]) +
              kA[a][1] * (h[1][0] * kA[b][0] + h[1][1] * kA[b][1]);
    }
  }
  // The sums over tiles, then |Gᵀ| m |G| into the taps.
  const Tensor m = ops::matmul(hm.permute({0, 2, 1}), v).contiguous();  // (16, k, c)
  const double* mp = m.data<double>();
  Tensor out = zeros({k, c, 3, 3}, {.dtype = DType::f64});
  double* op = out.data<double>();
  for (int64_t o = 0; o < k; ++o)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 3; ++q) {
          double sum = 0;
          for (int a = 0; a < 4; ++a)
            for (int b = 0; b < 4; ++b)
              sum += kGt[r][a] * mp[((a * 4 + b) * k + o) * c + ch] * kGt[q][b];
          op[((o * c + ch) * 3 + r) * 3 + q] = sum;
        }
  return out;
}

}  // namespace tcv::testing
