// conv2d: known values, f64 gradient checks against central differences, the
// f64 im2col + GEMM path against the direct reference loops, and the oneDNN f32
// path against f64, forward and every gradient.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <iostream>
#include <string>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "kernels/cpu/conv.h"
#include "support/error_bound.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::check_gradients;
using testing::expect_close;
using testing::rand_f64;

struct Case {
  const char* name;
  Shape x;  // (N, C, H, W)
  Shape w;  // (K, C/groups, R, S)
  bool bias;
  ops::Conv2dParams p;
};

std::vector<Case> cases() {
  return {
      {"basic_pad1", {2, 3, 7, 9}, {4, 3, 3, 3}, true, {}},
      {"stride2", {2, 3, 8, 7}, {4, 3, 3, 3}, true, {.stride = {2, 2}, .padding = {1, 1}}},
      {"dilation2", {1, 2, 9, 8}, {3, 2, 3, 3}, true, {.padding = {2, 2}, .dilation = {2, 2}}},
      {"groups2", {2, 4, 6, 6}, {6, 2, 3, 3}, true, {.padding = {1, 1}, .groups = 2}},
      {"depthwise", {2, 4, 7, 7}, {4, 1, 3, 3}, true, {.padding = {1, 1}, .groups = 4}},
      {"depthwise_mult2", {1, 3, 6, 5}, {6, 1, 3, 3}, false, {.stride = {2, 1}, .groups = 3}},
      {"no_bias", {2, 3, 5, 5}, {2, 3, 3, 3}, false, {.padding = {1, 1}}},
      {"odd_1x1", {3, 5, 3, 4}, {7, 5, 1, 1}, true, {}},
      {"odd_5x3_asym", {1, 2, 9, 6}, {3, 2, 5, 3}, true, {.stride = {2, 3}, .padding = {2, 0}}},
  };
}

Tensor run_conv(const Case& c, const std::vector<Tensor>& in) {
  return ops::conv2d(in[0], in[1], c.bias ? in[2] : Tensor(), c.p);
}

TEST(Conv2d, KnownValuesOnes) {
  Tensor x = ones({1, 1, 4, 4});
  Tensor w = ones({1, 1, 3, 3});
  Tensor b = full({1}, 0.5);
  Tensor y = ops::conv2d(x, w, b, {.padding = {1, 1}});
  ASSERT_EQ(y.shape(), (Shape{1, 1, 4, 4}));
  // Corners see 4 inputs, edges 6, the inside 9; plus the bias.
  const std::vector<float> expect{4.5, 6.5, 6.5, 4.5, 6.5, 9.5, 9.5, 6.5,
                                  6.5, 9.5, 9.5, 6.5, 4.5, 6.5, 6.5, 4.5};
  EXPECT_EQ(y.to_vector<float>(), expect);
}

TEST(Conv2d, KnownValuesStrideDilation) {
  // x[i] = i over a 5x5 plane; a 2x2 kernel of ones dilated by 2, stride 2:
  // y[0,0] = x[0,0] + x[0,2] + x[2,0] + x[2,2] = 0 + 2 + 10 + 12.
  Tensor x = arange(0, 25, 1, {.dtype = DType::f32}).reshape({1, 1, 5, 5});
  Tensor w = ones({1, 1, 2, 2});
  Tensor y = ops::conv2d(x, w, Tensor(), {.stride = {2, 2}, .dilation = {2, 2}});
  ASSERT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{24, 32, 64, 72}));
}

TEST(Conv2d, OutputShapes) {
  Tensor x = zeros({2, 4, 11, 10});
  EXPECT_EQ(
      ops::conv2d(x, zeros({8, 4, 3, 3}), Tensor(), {.stride = {2, 2}, .padding = {1, 1}}).shape(),
      (Shape{2, 8, 6, 5}));
  EXPECT_EQ(
      ops::conv2d(x, zeros({8, 2, 3, 3}), Tensor(), {.dilation = {2, 3}, .groups = 2}).shape(),
      (Shape{2, 8, 7, 4}));
}

TEST(Conv2d, GradCheckF64) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> in{rand_f64(c.x, 1), rand_f64(c.w, 2), rand_f64({c.w[0]}, 3)};
    if (!c.bias) in[2] = Tensor();
    const int64_t checked =
        check_gradients(std::string("conv2d/") + c.name,
                        [&](const std::vector<Tensor>& v) { return run_conv(c, v); }, in,
                        {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-5});
    EXPECT_GT(checked, 0);
  }
}

kernels::Conv2dGeom geom_of(const Case& c) {
  kernels::Conv2dGeom g;
  g.n = c.x[0], g.c = c.x[1], g.h = c.x[2], g.w = c.x[3];
  g.k = c.w[0], g.r = c.w[2], g.s = c.w[3];
  for (int i = 0; i < 2; ++i) {
    g.stride[i] = c.p.stride[i], g.pad[i] = c.p.padding[i], g.dilation[i] = c.p.dilation[i];
  }
  g.oh = (g.h + 2 * g.pad[0] - g.dilation[0] * (g.r - 1) - 1) / g.stride[0] + 1;
  g.ow = (g.w + 2 * g.pad[1] - g.dilation[1] * (g.s - 1) - 1) / g.stride[1] + 1;
  g.groups = c.p.groups;
  g.has_bias = c.bias;
  return g;
}

// The f64 path (im2col + dgemm) against the direct loops on every case, forward,
// dx, dweight and dbias: both sum the same products in f64, so they agree within
// γₙ·Σ|a||b| in f64 (n < 100 terms here: 1e-14 of the sums, far below 1e-12).
TEST(Conv2d, F64GemmMatchesDirectLoops) {
  uint64_t seed = 200;
  for (Case c : cases()) {
    SCOPED_TRACE(c.name);
    const kernels::Conv2dGeom g = geom_of(c);
    Tensor x = rand_f64(c.x, ++seed, -1, 1, false), w = rand_f64(c.w, ++seed, -1, 1, false);
    Tensor b = rand_f64({c.w[0]}, ++seed, -1, 1, false);
    Tensor dy = rand_f64({g.n, g.k, g.oh, g.ow}, ++seed, -1, 1, false);
    const kernels::KTensor bk = b.k();
    Tensor y = empty(dy.shape(), {.dtype = DType::f64}), y_ref = empty_like(y);
    kernels::cpu::conv2d_forward(g, x.k(), w.k(), &bk, y.k());
    kernels::cpu::conv2d_forward_ref(g, x.k(), w.k(), &bk, y_ref.k());
    expect_close(y, y_ref, 1e-12, 1e-12, "y");
    Tensor dx = empty_like(x), dw = empty_like(w), db = empty_like(b);
    Tensor dx_ref = empty_like(x), dw_ref = empty_like(w), db_ref = empty_like(b);
    const kernels::KTensor dxk = dx.k(), dwk = dw.k(), dbk = db.k();
    const kernels::KTensor dxr = dx_ref.k(), dwr = dw_ref.k(), dbr = db_ref.k();
    kernels::cpu::conv2d_backward(g, x.k(), w.k(), dy.k(), &dxk, &dwk, c.bias ? &dbk : nullptr);
    kernels::cpu::conv2d_backward_ref(g, x.k(), w.k(), dy.k(), &dxr, &dwr, c.bias ? &dbr : nullptr);
    expect_close(dx, dx_ref, 1e-12, 1e-12, "dx");
    expect_close(dw, dw_ref, 1e-12, 1e-12, "dweight");
    if (c.bias) expect_close(db, db_ref, 1e-12, 1e-12, "dbias");
  }
}

// Kernel taps that read only padding are cut off before the kernels run (a
// dilation-36 3x3 on a 32x32 map is a 1x1): the output and every gradient equal
// the full kernel's from the direct loops, and the cut taps' gradient is zero.
TEST(Conv2d, TapsReadingOnlyPaddingAreSkipped) {
  struct DeadCase {
    const char* name;
    Shape x;
    ops::Conv2dParams p;
  };
  const DeadCase cases[] = {
      {"center only", {2, 3, 5, 6}, {.padding = {6, 6}, .dilation = {6, 6}}},
      {"rows only", {2, 3, 4, 20}, {.padding = {5, 5}, .dilation = {5, 5}}},
      {"strided", {1, 2, 7, 7}, {.stride = {2, 2}, .padding = {8, 8}, .dilation = {8, 8}}},
      {"5x5 keeps 3x3", {1, 2, 6, 6}, {.padding = {8, 8}, .dilation = {4, 4}}},
  };
  uint64_t seed = 300;
  for (const DeadCase& dc : cases) {
    SCOPED_TRACE(dc.name);
    const int64_t r = std::string(dc.name) == "5x5 keeps 3x3" ? 5 : 3;
    const Case c{dc.name, dc.x, {4, dc.x[1], r, r}, true, dc.p};
    const kernels::Conv2dGeom g = geom_of(c);
    for (DType dt : {DType::f64, DType::f32}) {
      Tensor x = rand_f64(c.x, ++seed, -1, 1, false).to(dt).set_requires_grad(true);
      Tensor w = rand_f64(c.w, ++seed, -1, 1, false).to(dt).set_requires_grad(true);
      Tensor b = rand_f64({4}, ++seed, -1, 1, false).to(dt).set_requires_grad(true);
      Tensor y = ops::conv2d(x, w, b, c.p);
      ASSERT_EQ(y.shape(), (Shape{g.n, g.k, g.oh, g.ow}));
      Tensor dy = rand_f64(y.shape(), ++seed, -1, 1, false);
      y.backward(dy.to(dt));
      // The full kernel through the direct loops, in f64.
      Tensor x64 = x.detach().to(DType::f64), w64 = w.detach().to(DType::f64);
      Tensor b64 = b.detach().to(DType::f64);
      Tensor y_ref = empty(y.shape(), {.dtype = DType::f64});
      const kernels::KTensor bk = b64.k();
      kernels::cpu::conv2d_forward_ref(g, x64.k(), w64.k(), &bk, y_ref.k());
      Tensor dx = empty_like(x64), dw = empty_like(w64), db = empty_like(b64);
      const kernels::KTensor dxk = dx.k(), dwk = dw.k(), dbk = db.k();
      kernels::cpu::conv2d_backward_ref(g, x64.k(), w64.k(), dy.k(), &dxk, &dwk, &dbk);
      // Inputs in [-1, 1]: every sum has at most n = 160 terms (dweight's N·OH·OW)
      // of magnitude <= 1, so its f32 error is within γₙ·n.
      const double tol = dt == DType::f64 ? 1e-12 : testing::gamma_n(160, DType::f32) * 160;
      expect_close(y, y_ref, tol, 0, "y");
      expect_close(x.grad(), dx, tol, 0, "dx");
      expect_close(w.grad(), dw, tol, 0, "dweight");
      expect_close(b.grad(), db, tol, 0, "dbias");
    }
  }
  // The centre-only case: every off-centre tap's gradient is exactly zero.
  Tensor w = rand_f64({4, 3, 3, 3}, 400).set_requires_grad(true);
  ops::sum(ops::conv2d(rand_f64({2, 3, 5, 6}, 401), w, Tensor(),
                       {.padding = {6, 6}, .dilation = {6, 6}}))
      .backward();
  const std::vector<double> gw = w.grad().to_vector<double>();
  for (size_t i = 0; i < gw.size(); ++i)
    if (i % 9 != 4) {
      EXPECT_EQ(gw[i], 0.0) << i;
    }
}

// How much more error oneDNN's forward, backward-data and backward-weights
// implementations for the case may make than direct summation: Winograd's
// growth where it runs Winograd, else 1.
std::array<double, 3> growth_of(const Case& c) {
  const std::string names = kernels::cpu::conv2d_impl_names(geom_of(c));
  std::array<double, 3> growth{1, 1, 1};
  size_t begin = 0;
  for (double& gr : growth) {
    const size_t end = names.find(" / ", begin);
    if (names.substr(begin, end - begin).find("wino") != std::string::npos)
      gr = testing::kWinograd4x3Growth;
    if (end == std::string::npos) break;
    begin = end + 3;
  }
  return growth;
}

// The f32 oneDNN path against the f64 reference, forward and all gradients,
// each within the rounding-error bound of its sums (support/error_bound.h):
// y sums C/groups·R·S products and the bias, dx K/groups·R·S products, dweight
// and dbias N·OH·OW; the f32 copies of x, w and dy add 2u relative per product.
// Returns the largest |error| / bound seen.
double compare_f32_with_f64(const Case& c, uint64_t seed) {
  std::vector<Tensor> in64{rand_f64(c.x, seed), rand_f64(c.w, seed + 1),
                           c.bias ? rand_f64({c.w[0]}, seed + 2) : Tensor()};
  std::vector<Tensor> in32;
  for (const Tensor& t : in64) {
    if (!t.defined()) {
      in32.emplace_back();
      continue;
    }
    Tensor f = t.detach().to(DType::f32);
    f.set_requires_grad(true);
    in32.push_back(f);
  }
  Tensor y64 = run_conv(c, in64);
  Tensor dy64 = rand_f64(y64.shape(), seed + 3, -1, 1, false);
  y64.backward(dy64);
  Tensor y32 = run_conv(c, in32);
  EXPECT_EQ(y32.dtype(), DType::f32);
  y32.backward(dy64.to(DType::f32));

  const testing::AbsSums sums =
      testing::abs_sums([&](const std::vector<Tensor>& v) { return run_conv(c, v); }, in64, dy64);
  const std::array<double, 3> growth = growth_of(c);
  const int64_t taps = c.w[2] * c.w[3], positions = c.x[0] * y64.size(2) * y64.size(3);
  const int64_t terms[] = {c.w[1] * taps + 3, c.w[0] / c.p.groups * taps + 2, positions + 2,
                           positions + 1};
  auto bound = [&](const Tensor& abs_sum, int i) {
    const double g = i == 0 ? growth[0] : i == 1 ? growth[1] : growth[2];
    return ops::mul(abs_sum, g * testing::gamma_n(terms[i], DType::f32));
  };
  double worst = testing::expect_within(y32, y64, bound(sums.y, 0), std::string(c.name) + " y");
  const char* names[] = {"dx", "dweight", "dbias"};
  for (size_t i = 0; i < in64.size(); ++i) {
    if (!in64[i].defined()) continue;
    EXPECT_TRUE(in32[i].grad().defined()) << c.name << " " << names[i];
    if (!in32[i].grad().defined()) continue;
    worst = std::max(worst, testing::expect_within(in32[i].grad(), in64[i].grad(),
                                                   bound(sums.grads[i], static_cast<int>(i) + 1),
                                                   std::string(c.name) + " " + names[i]));
  }
  return worst;
}

TEST(Conv2d, OneDnnF32MatchesReference) {
  uint64_t seed = 10;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    compare_f32_with_f64(c, seed += 10);
  }
}

TEST(Conv2d, OneDnnF32MatchesReferenceBlockedShapes) {
  // Channel counts that are multiples of 16 take oneDNN's blocked JIT kernels.
  const std::vector<Case> big{
      {"c32_k48_pad1", {2, 32, 10, 9}, {48, 32, 3, 3}, true, {.padding = {1, 1}}},
      {"c32_stride2", {2, 32, 9, 9}, {32, 32, 3, 3}, true, {.stride = {2, 2}, .padding = {1, 1}}},
      {"c64_1x1", {2, 64, 5, 5}, {16, 64, 1, 1}, false, {}},
      {"dw32", {2, 32, 8, 8}, {32, 1, 3, 3}, true, {.padding = {1, 1}, .groups = 32}},
      {"g2_c32",
       {1, 32, 7, 7},
       {32, 16, 3, 3},
       true,
       {.padding = {2, 2}, .dilation = {2, 2}, .groups = 2}},
  };
  uint64_t seed = 500;
  for (const Case& c : big) {
    SCOPED_TRACE(c.name);
    compare_f32_with_f64(c, seed += 10);
  }
}

// Restores the process-wide algorithm choice when a test ends.
struct ConvAlgoScope {
  kernels::cpu::ConvAlgo saved = kernels::cpu::get_conv_algo();
  explicit ConvAlgoScope(kernels::cpu::ConvAlgo algo) { kernels::cpu::set_conv_algo(algo); }
  ~ConvAlgoScope() { kernels::cpu::set_conv_algo(saved); }
};

kernels::Conv2dGeom geom_3x3(int64_t n, int64_t c, int64_t hw) {
  kernels::Conv2dGeom g;
  g.n = n, g.c = c, g.h = hw, g.w = hw, g.k = c, g.r = 3, g.s = 3, g.oh = hw, g.ow = hw;
  g.pad[0] = g.pad[1] = 1;
  return g;
}

TEST(Conv2d, WinogradMatchesReference) {
  // 3x3 stride-1 layers with enough images take oneDNN's Winograd F(4x4, 3x3)
  // kernels under the default choice, on AVX-512 CPUs; their f32 results stay
  // within Winograd's error bound of the f64 reference.
  ConvAlgoScope scope(kernels::cpu::ConvAlgo::automatic);
  const std::string impl = kernels::cpu::conv2d_impl_names(geom_3x3(32, 32, 16));
  // oneDNN's direct kernel names its ISA: Winograd exists for AVX-512 only
  // (ONEDNN_MAX_CPU_ISA=AVX2 or a CPU without AVX-512 has none).
  const bool avx512 =
      kernels::cpu::conv2d_impl_names(geom_3x3(1, 32, 8)).find("avx512") != std::string::npos;
  if (avx512)  // forward and backward-data; weights vary by shape
    EXPECT_EQ(impl.rfind("jit_wino_4x3:avx512_core / jit_wino_4x3:avx512_core / ", 0), 0u) << impl;
  else
    std::cout << "no AVX-512: oneDNN runs " << impl << "\n";
  const double worst = compare_f32_with_f64(
      {"wino_c32", {32, 32, 16, 16}, {32, 32, 3, 3}, true, {.padding = {1, 1}}}, 900);
  std::cout << "largest |error| / bound: " << worst << "\n";
  // Few images: oneDNN's heuristic keeps direct convolution.
  EXPECT_EQ(kernels::cpu::conv2d_impl_names(geom_3x3(1, 32, 8)).find("wino"), std::string::npos);
}

TEST(Conv2d, DirectAlgorithmIsSelectable) {
  const Case c{"n32_c32_3x3", {32, 32, 8, 8}, {32, 32, 3, 3}, false, {.padding = {1, 1}}};
  double worst_auto = 0, worst_direct = 0;
  {
    ConvAlgoScope scope(kernels::cpu::ConvAlgo::automatic);
    worst_auto = compare_f32_with_f64(c, 31);  // Winograd on AVX-512 CPUs
  }
  {
    ConvAlgoScope scope(kernels::cpu::ConvAlgo::direct);
    EXPECT_EQ(kernels::cpu::conv2d_impl_names(geom_of(c)).find("wino"), std::string::npos);
    const size_t n = kernels::cpu::conv2d_cache_size();
    ops::conv2d(rand_f64(c.x, 1, -1, 1, false).to(DType::f32),
                rand_f64(c.w, 2, -1, 1, false).to(DType::f32), Tensor(), c.p);
    EXPECT_EQ(kernels::cpu::conv2d_cache_size(), n);  // built by conv2d_impl_names above
    worst_direct = compare_f32_with_f64(c, 31);
  }
  std::cout << "largest |error| / bound: auto " << worst_auto << ", direct " << worst_direct
            << "\n";
  EXPECT_EQ(kernels::cpu::parse_conv_algo("auto", "x"), kernels::cpu::ConvAlgo::automatic);
  EXPECT_EQ(kernels::cpu::parse_conv_algo("direct", "x"), kernels::cpu::ConvAlgo::direct);
  try {
    kernels::cpu::parse_conv_algo("wino", "TCV_CONV_ALGO");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "TCV_CONV_ALGO must be \"auto\" or \"direct\", got \"wino\"");
  }
}

TEST(Conv2d, NonContiguousInput) {
  Tensor base = rand_f64({2, 6, 5, 3}, 7, -1, 1, false);  // (N, H, W, C) memory
  Tensor x = base.permute({0, 3, 1, 2});                  // (N, C, H, W) view
  ASSERT_FALSE(x.is_contiguous());
  Tensor w = rand_f64({4, 3, 3, 3}, 8, -1, 1, false);
  Tensor y = ops::conv2d(x, w, Tensor(), {.padding = {1, 1}});
  Tensor y_ref = ops::conv2d(x.contiguous(), w, Tensor(), {.padding = {1, 1}});
  expect_close(y, y_ref, 0, 0, "f64 view");
  Tensor y32 = ops::conv2d(x.to(DType::f32), w.to(DType::f32), Tensor(), {.padding = {1, 1}});
  expect_close(y32, y_ref, 1e-5, 1e-5, "f32 view");
}

TEST(Conv2d, OnlyRequestedGradients) {
  Tensor x = rand_f64({1, 2, 5, 5}, 1, -1, 1, false).to(DType::f32);
  Tensor w = rand_f64({3, 2, 3, 3}, 2).to(DType::f32).detach();
  w.set_requires_grad(true);
  Tensor y = ops::conv2d(x, w);
  ops::sum(y).backward();
  EXPECT_FALSE(x.grad().defined());
  ASSERT_TRUE(w.grad().defined());
  // d sum(y) / dw[k, c, r, s] = sum of the x window the tap sees.
  Tensor xs = x.narrow(1, 0, 1).narrow(2, 0, 3).narrow(3, 0, 3);  // channel 0
  EXPECT_NEAR(w.grad().to_vector<float>()[0], ops::sum(xs).item(), 1e-4);
}

TEST(Conv2d, PrimitivesAreCached) {
  Tensor x = rand_f64({2, 16, 6, 6}, 3, -1, 1, false).to(DType::f32);
  Tensor w = rand_f64({16, 16, 3, 3}, 4, -1, 1, false).to(DType::f32);
  ops::conv2d(x, w, Tensor(), {.padding = {1, 1}});
  const size_t n = kernels::cpu::conv2d_cache_size();
  for (int i = 0; i < 3; ++i) ops::conv2d(x, w, Tensor(), {.padding = {1, 1}});
  EXPECT_EQ(kernels::cpu::conv2d_cache_size(), n);
  ops::conv2d(x, w, Tensor(), {.stride = {2, 2}, .padding = {1, 1}});
  EXPECT_EQ(kernels::cpu::conv2d_cache_size(), n + 1);
}

TEST(Conv2d, Errors) {
  Tensor x = zeros({1, 4, 5, 5});
  EXPECT_THROW(ops::conv2d(x, zeros({2, 3, 3, 3})), Error);                           // channels
  EXPECT_THROW(ops::conv2d(x, zeros({3, 2, 3, 3}), Tensor(), {.groups = 2}), Error);  // K % groups
  EXPECT_THROW(ops::conv2d(x, zeros({2, 4, 3, 3}), zeros({3})), Error);               // bias
  EXPECT_THROW(ops::conv2d(zeros({4, 5, 5}), zeros({2, 4, 3, 3})), Error);            // 3-D input
  EXPECT_THROW(ops::conv2d(x, zeros({2, 4, 7, 7})), Error);                           // too small
  EXPECT_THROW(ops::conv2d(x, zeros({2, 4, 3, 3}, {.dtype = DType::f64})), Error);    // dtypes
  try {
    ops::conv2d(x, zeros({2, 3, 3, 3}));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[conv2d]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(2, 3, 3, 3)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tcv
