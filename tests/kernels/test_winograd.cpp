// Winograd F(2x2, 3x3) (kernels/cpu/winograd.h), and the polyphase split of
// 3x3 stride-2 layers, against the f64 convolution,
// within its own rounding-error bound γ_(C+8)·M (tests/support/winograd_bound.h,
// a bound from the algorithm that holds on every CPU): odd map sizes (tiles
// hanging over the edge), padding 0, 1 and 2, one, two and three channel blocks
// (a last filter panel one block wide), bias and ReLU, enough tiles for several
// blocks on several threads; exact zeros where an output's window is zero (a
// weight gradient's terms are); each image's result independent of the batch
// around it and of the threads. The weight gradient is F(3x3, 2x2), its bound
// γ_(T+6)·M over the T tiles.
#include "kernels/cpu/winograd.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <string>

#include "engine/ops.h"
#include "kernels/cpu/blocked.h"
#include "support/error_bound.h"
#include "support/gradcheck.h"
#include "support/winograd_bound.h"

namespace tcv {
namespace {

using kernels::cpu::WinogradGeom;
using testing::rand_f64;

struct Case {
  const char* name;
  int64_t n, c_blocks, k_blocks, h, w, pad;
  bool bias, relu;
  int64_t dil = 1, stride = 1;  // stride 2: padding 1, no dilation
};

// f32 (n, c, h, w) row-major <-> the blocked layout, in tensors tcv allocates
// (aligned as the kernels load them).
Tensor to_blocked_f32(const Tensor& t) {
  const Tensor src = t.to(DType::f32).contiguous();
  Tensor out = empty(src.shape(), {.dtype = DType::f32});
  const int64_t dims[4] = {src.size(0), src.size(1), src.size(2), src.size(3)};
  kernels::cpu::nchw_to_blocked(dims, DType::f32, src.data<float>(), out.data<float>());
  return out;
}
Tensor from_blocked_f32(const Tensor& t) {
  Tensor out = empty(t.shape(), {.dtype = DType::f32});
  const int64_t dims[4] = {t.size(0), t.size(1), t.size(2), t.size(3)};
  kernels::cpu::blocked_to_nchw(dims, DType::f32, t.data<float>(), out.data<float>());
  return out;
}

// Inputs that are zero over a band of rows in every channel (as an image's
// padding or a dead region after a ReLU), so that some outputs' windows are
// all zero.
Tensor banded(const Shape& s, uint64_t seed) {
  Tensor x = rand_f64(s, seed, -1, 1, false);
  const Tensor rows = ops::lt(arange(0, static_cast<double>(s[2]), 1, {.dtype = DType::f64}),
                              static_cast<double>(s[2] / 2));
  return ops::mul(x, rows.reshape({1, 1, s[2], 1}).to(DType::f64));
}

// |got − want| <= γ · sums everywhere, and exactly equal where the output's
// window is all zero (M = 0: the result is the bias alone).
void expect_within(const Tensor& got32, const Tensor& want, const Tensor& sums,
                   const Tensor& window, double gamma, const std::string& what) {
  const Tensor got = got32.to(DType::f64).contiguous();
  const double* a = got.data<double>();
  const Tensor r_t = want.contiguous(), s_t = sums.contiguous(), m_t = window.contiguous();
  const double* r = r_t.data<double>();
  const double* b = s_t.data<double>();
  const double* m = m_t.data<double>();
  int64_t zeros = 0, bad = 0;
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double e = std::fabs(a[i] - r[i]);
    if (m[i] == 0) {
      ++zeros;
      if (e != 0) ++bad;
    } else {
      worst = std::max(worst, e / (gamma * b[i]));
    }
  }
  EXPECT_EQ(bad, 0) << what << ": outputs of an all-zero window that are not exact";
  EXPECT_GT(zeros, 0) << what << ": no all-zero window exercised";
  EXPECT_LE(worst, 1.0) << what;
  std::cout << "  " << what << ": largest |error| / bound " << worst << ", " << zeros
            << " outputs of all-zero windows exact\n";
}

const Case kCases[] = {
    {"odd_7x9_pad1", 2, 1, 1, 7, 9, 1, false, false},
    {"pad0_6x5_c2_k3", 3, 2, 3, 6, 5, 0, false, false},
    {"pad2_5x4_k2", 1, 1, 2, 5, 4, 2, false, false},
    {"bias_relu_11x10_c3_k1", 5, 3, 1, 11, 10, 1, true, true},
    {"many_tiles_20x18_c4_k4", 4, 4, 4, 20, 18, 1, true, false},
    // More than kernels/cpu/winograd.cpp's 512-channel chunk in, then out (the
    // products of input chunks add up; a last panel of one block).
    {"wide_in_6x7_c66_k3", 1, 66, 3, 6, 7, 1, true, false},
    {"wide_out_5x6_c3_k66", 2, 3, 66, 5, 6, 1, false, true},
    // Dilated: phases of unequal size, tiles partly and wholly outside the map.
    {"dilated2_pad2_13x10", 2, 1, 2, 13, 10, 2, true, false, 2},
    {"dilated3_pad1_17x15_c2", 1, 2, 1, 17, 15, 1, false, false, 3},
    {"dilated4_pad4_16x16_k3", 1, 1, 3, 16, 16, 4, true, true, 4},
    // Rows of the weight gradient's transformed inputs one cache line longer
    // than their 128 channels (kernels/cpu/winograd.cpp's tile_row).
    {"padded_rows_9x8_c16_k2", 2, 16, 2, 9, 8, 1, true, false},
    // At least 256 x 256 channel pairs: the weight gradient's sums shared by the
    // threads, over two blocks of tiles (162 tiles; a block takes 4 MiB of them).
    {"shared_sums_17x17_c32_k32", 2, 32, 32, 17, 17, 1, false, false},
    // Stride 2 (the polyphase split): odd maps (2x2 output tiles and backward-
    // data's 4x4 input-gradient tiles over the edge), even ones, bias and ReLU,
    // the chunks of wide layers, padded rows, and shared sums over two blocks
    // (100 tiles; a block takes 81 of them at 256 x 256 channels on AVX2).
    {"s2_odd_9x7_k2", 2, 1, 2, 9, 7, 1, false, false, 1, 2},
    {"s2_even_16x12_c2_k3", 3, 2, 3, 16, 12, 1, false, false, 1, 2},
    {"s2_bias_relu_11x10_c3", 3, 3, 1, 11, 10, 1, true, true, 1, 2},
    {"s2_wide_in_6x7_c66_k3", 1, 66, 3, 6, 7, 1, true, false, 1, 2},
    {"s2_wide_out_5x6_c3_k66", 2, 3, 66, 5, 6, 1, false, true, 1, 2},
    {"s2_padded_rows_10x9_c16_k2", 2, 16, 2, 10, 9, 1, true, false, 1, 2},
    {"s2_shared_sums_17x17_c32_k32", 4, 32, 32, 17, 17, 1, false, false, 1, 2},
};

// A case's geometry with this CPU's channel block.
WinogradGeom geom_of(const Case& t, int64_t blk) {
  const bool s2 = t.stride == 2;
  return {t.n,
          t.c_blocks * blk,
          t.h,
          t.w,
          t.k_blocks * blk,
          s2 ? (t.h + 1) / 2 : t.h + 2 * t.pad - 2 * t.dil,
          s2 ? (t.w + 1) / 2 : t.w + 2 * t.pad - 2 * t.dil,
          t.pad,
          t.pad,
          t.dil,
          t.dil,
          t.stride};
}

// The case's convolution as ops::conv2d takes it.
ops::Conv2dParams params_of(const Case& t) {
  return {.stride = {t.stride, t.stride}, .padding = {t.pad, t.pad}, .dilation = {t.dil, t.dil}};
}

// f32 weights (k, c, 3, 3) uniform in ±1/√(fan_in · 9).
Tensor weights_f32(int64_t k, int64_t c, int64_t fan_in, uint64_t seed) {
  return ops::mul(rand_f64({k, c, 3, 3}, seed, -1, 1, false), 1.0 / std::sqrt(fan_in * 9.0))
      .to(DType::f32);
}

TEST(Winograd2, ForwardWithinItsBoundOfF64) {
  const int64_t blk = kernels::cpu::channel_block();
  if (blk == 0) GTEST_SKIP() << "no blocked f32 layout on this CPU";
  uint64_t seed = 4100;
  for (const Case& t : kCases) {
    seed += 10;
    const WinogradGeom g = geom_of(t, blk);
    const int64_t c = g.c, k = g.k;
    // f32 values, and the same values in f64.
    const Tensor x = banded({t.n, c, t.h, t.w}, seed).to(DType::f32).to(DType::f64);
    const Tensor w = weights_f32(k, c, c, seed + 1);
    const Tensor b = t.bias ? rand_f64({k}, seed + 2, -1, 1, false).to(DType::f32) : Tensor();
    Tensor y = empty({t.n, k, g.oh, g.ow}, {.dtype = DType::f32});
    const Tensor xb = to_blocked_f32(x);
    kernels::cpu::winograd_forward(g, xb.data<float>(), w.data<float>(),
                                   t.bias ? b.data<float>() : nullptr, t.relu, y.data<float>());
    const Tensor w64 = w.to(DType::f64), b64 = t.bias ? b.to(DType::f64) : Tensor();
    Tensor want = ops::conv2d(x, w64, b64, params_of(t));
    if (t.relu) want = ops::relu(want);  // 1-Lipschitz: the bound still holds
    const Tensor m = t.stride == 2
                         ? testing::winograd2_stride2_magnitudes(ops::abs(x), ops::abs(w64))
                         : testing::winograd2_magnitudes(ops::abs(x), ops::abs(w64), t.pad, t.pad,
                                                         {t.dil, t.dil});
    const Tensor sums = t.bias ? ops::add(m, ops::abs(b64).reshape({1, k, 1, 1})) : m;
    // One more rounding for the bias.
    expect_within(from_blocked_f32(y), want, sums, m,
                  testing::gamma_n(c + (t.bias ? 9 : 8), DType::f32), t.name);
  }
}

TEST(Winograd2, BackwardDataWithinItsBoundOfF64) {
  const int64_t blk = kernels::cpu::channel_block();
  if (blk == 0) GTEST_SKIP() << "no blocked f32 layout on this CPU";
  uint64_t seed = 4200;
  for (const Case& t : kCases) {
    seed += 10;
    const WinogradGeom g = geom_of(t, blk);
    const int64_t c = g.c, k = g.k;
    const Tensor dy = banded({t.n, k, g.oh, g.ow}, seed).to(DType::f32).to(DType::f64);
    const Tensor w = weights_f32(k, c, k, seed + 1);
    Tensor dx = empty({t.n, c, t.h, t.w}, {.dtype = DType::f32});
    const Tensor dyb = to_blocked_f32(dy);
    kernels::cpu::winograd_backward_data(g, dyb.data<float>(), w.data<float>(), dx.data<float>());
    // The f64 reference: the gradient of the convolution's input.
    const Tensor x = zeros({t.n, c, t.h, t.w}, {.dtype = DType::f64}).set_requires_grad(true);
    ops::conv2d(x, w.to(DType::f64), Tensor(), params_of(t)).backward(dy);
    const Tensor abs_w = ops::abs(w.to(DType::f64));
    const Tensor sums = t.stride == 2 ? testing::winograd2_stride2_magnitudes_backward_data(
                                            ops::abs(dy), abs_w, t.h, t.w)
                                      : testing::winograd2_magnitudes_backward_data(
                                            ops::abs(dy), abs_w, t.pad, t.pad, {t.dil, t.dil});
    expect_within(from_blocked_f32(dx), x.grad(), sums, sums, testing::gamma_n(k + 8, DType::f32),
                  std::string(t.name) + " dx");
  }
}

TEST(Winograd2, BackwardWeightsWithinItsBoundOfF64) {
  const int64_t blk = kernels::cpu::channel_block();
  if (blk == 0) GTEST_SKIP() << "no blocked f32 layout on this CPU";
  uint64_t seed = 4400;
  for (const Case& t : kCases) {
    seed += 10;
    const WinogradGeom g = geom_of(t, blk);
    const int64_t c = g.c, k = g.k;
    // Channel 0 of x and channel 1 of dy all zero: those filters' gradients
    // have no nonzero term and must be exactly 0.
    Tensor x = banded({t.n, c, t.h, t.w}, seed).to(DType::f32).to(DType::f64);
    Tensor dy = banded({t.n, k, g.oh, g.ow}, seed + 1).to(DType::f32).to(DType::f64);
    x = ops::mul(x, ops::gt(arange(0, static_cast<double>(c), 1, {.dtype = DType::f64}), 0.5)
                        .to(DType::f64)
                        .reshape({1, c, 1, 1}));
    dy = ops::mul(dy, ops::ne(arange(0, static_cast<double>(k), 1, {.dtype = DType::f64}),
                              full({k}, 1.0, {.dtype = DType::f64}))
                          .to(DType::f64)
                          .reshape({1, k, 1, 1}));
    Tensor dw = empty({k, c, 3, 3}, {.dtype = DType::f32});
    Tensor db = empty({k}, {.dtype = DType::f32});
    const Tensor xb = to_blocked_f32(x), dyb = to_blocked_f32(dy);
    kernels::cpu::winograd_backward_weights(g, xb.data<float>(), dyb.data<float>(),
                                            dw.data<float>(), t.bias ? db.data<float>() : nullptr);
    // The f64 reference: the gradients of the convolution's weight and bias.
    const Tensor w = zeros({k, c, 3, 3}, {.dtype = DType::f64}).set_requires_grad(true);
    const Tensor b = zeros({k}, {.dtype = DType::f64}).set_requires_grad(true);
    ops::conv2d(x, w, b, params_of(t)).backward(dy);
    const Tensor m = t.stride == 2 ? testing::winograd2_stride2_magnitudes_backward_weights(
                                         ops::abs(x), ops::abs(dy))
                                   : testing::winograd2_magnitudes_backward_weights(
                                         ops::abs(x), ops::abs(dy), t.pad, t.pad, {t.dil, t.dil});
    const int64_t tiles = testing::winograd2_tiles(t.n, g.oh, g.ow, {t.dil, t.dil});
    expect_within(dw, w.grad(), m, m, testing::gamma_n(tiles + 6, DType::f32),
                  std::string(t.name) + " dweight");
    if (t.bias) {
      // Σ dy over N·OH·OW terms, as direct convolution sums it.
      const Tensor sums = ops::sum(ops::abs(dy), {0, 2, 3});
      expect_within(db, b.grad(), sums, sums, testing::gamma_n(t.n * g.oh * g.ow, DType::f32),
                    std::string(t.name) + " dbias");
    }
  }
}

// Each image's outputs come from its own tiles in a fixed order: the same bits
// alone or in a batch (data-parallel ranks splitting a batch agree with one
// process), on one thread or several.
TEST(Winograd2, ImagesIndependentOfBatchAndThreads) {
  const int64_t blk = kernels::cpu::channel_block();
  if (blk == 0) GTEST_SKIP() << "no blocked f32 layout on this CPU";
  const int64_t n = 6, c = 2 * blk, k = 2 * blk, hw = 13;
  const WinogradGeom g{n, c, hw, hw, k, hw, hw, 1, 1};
  const Tensor x = to_blocked_f32(rand_f64({n, c, hw, hw}, 4301, -1, 1, false));
  const Tensor w = rand_f64({k, c, 3, 3}, 4302, -1, 1, false).to(DType::f32);
  Tensor all = empty({n, k, hw, hw}, {.dtype = DType::f32});
  kernels::cpu::winograd_forward(g, x.data<float>(), w.data<float>(), nullptr, false,
                                 all.data<float>());
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const int64_t in_img = c * hw * hw, out_img = k * hw * hw;
  for (int64_t i = 0; i < n; ++i) {
    Tensor one = empty({1, k, hw, hw}, {.dtype = DType::f32});
    WinogradGeom g1 = g;
    g1.n = 1;
    kernels::cpu::winograd_forward(g1, x.data<float>() + i * in_img, w.data<float>(), nullptr,
                                   false, one.data<float>());
    EXPECT_EQ(
        std::memcmp(one.data<float>(), all.data<float>() + i * out_img, out_img * sizeof(float)), 0)
        << "image " << i;
  }
  omp_set_num_threads(threads);
}

// An empty batch: no tile, so forward and backward-data write nothing and the
// gradients are zeros (not the buffers' old values).
TEST(Winograd2, EmptyBatchGivesZeroGradients) {
  const int64_t blk = kernels::cpu::channel_block();
  if (blk == 0) GTEST_SKIP() << "no blocked f32 layout on this CPU";
  const int64_t c = 2 * blk, k = blk;
  const WinogradGeom g{0, c, 9, 9, k, 9, 9, 1, 1};
  const Tensor w = rand_f64({k, c, 3, 3}, 4401, -1, 1, false).to(DType::f32);
  float none[16] = {};
  kernels::cpu::winograd_forward(g, none, w.data<float>(), nullptr, false, none);
  kernels::cpu::winograd_backward_data(g, none, w.data<float>(), none);
  Tensor dw = full({k, c, 3, 3}, 7.0, {.dtype = DType::f32});
  Tensor db = full({k}, 7.0, {.dtype = DType::f32});
  kernels::cpu::winograd_backward_weights(g, none, none, dw.data<float>(), db.data<float>());
  EXPECT_EQ(ops::max(ops::abs(dw)).item<double>(), 0.0);
  EXPECT_EQ(ops::max(ops::abs(db)).item<double>(), 0.0);
  for (float v : none) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace tcv
