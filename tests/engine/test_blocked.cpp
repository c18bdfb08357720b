// oneDNN's nChw16c layout kept between CPU f32 layers: convolutions write it,
// batch norm and elementwise ops keep it, and every other access converts the
// storage back to row-major first. Each test runs a computation through blocked
// tensors and checks its values (and gradients) against the same computation
// in f64, where nothing is ever blocked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "kernels/cpu/blocked.h"
#include "kernels/cpu/conv.h"
#include "support/conv_geom.h"
#include "support/error_bound.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::expect_close;
using testing::rand_f64;

// A leaf f32 copy of an f64 tensor that requires grad.
Tensor f32_leaf(const Tensor& t) {
  Tensor f = t.detach().to(DType::f32);
  f.set_requires_grad(true);
  return f;
}

// oneDNN asks for nChw16c where its AVX-512 kernels run and for nChw8c where
// AVX2 ones run (kernels/cpu/blocked.h): tcv keeps either. Where neither is
// asked for, every tensor stays row-major: the layout checks below expect that.
bool blocks_here() {
  return kernels::cpu::conv2d_blocked_layouts(testing::conv3x3_geom(2, 16, 32, 6, 5)).dst;
}

// The rounding-error bound of an f32 convolution without bias against f64
// (support/error_bound.h): C·R·S products per output, the f32 copies of x and
// w add 2u relative per product (the default algorithm: direct kernels).
Tensor conv_bound(const Tensor& x, const Tensor& w, const ops::Conv2dParams& p) {
  const Tensor sums =
      ops::conv2d(ops::abs(x.to(DType::f64)), ops::abs(w.to(DType::f64)), Tensor(), p);
  return ops::mul(sums, testing::gamma_n(w.size(1) * w.size(2) * w.size(3) + 2, DType::f32));
}

TEST(Blocked, ConvolutionWritesTheBlockedLayoutAndReadsBackRowMajor) {
  Tensor x = rand_f64({2, 16, 6, 5}, 1, -1, 1, false).to(DType::f32);
  Tensor w = rand_f64({32, 16, 3, 3}, 2, -1, 1, false).to(DType::f32);
  Tensor y = ops::conv2d(x, w, Tensor(), {.padding = {1, 1}});
  ASSERT_EQ(y.is_blocked(), blocks_here());
  EXPECT_EQ(y.desc_as_stored().blocked, blocks_here());
  const Tensor y64 = ops::conv2d(x.to(DType::f64), w.to(DType::f64), Tensor(), {.padding = {1, 1}});
  // A view reads row-major values, converting the storage on the way.
  Tensor corner = y.narrow(1, 17, 2).narrow(2, 4, 2);
  const Tensor bound = conv_bound(x, w, {.padding = {1, 1}});
  testing::expect_within(corner, y64.narrow(1, 17, 2).narrow(2, 4, 2),
                         bound.narrow(1, 17, 2).narrow(2, 4, 2), "view");
  EXPECT_FALSE(y.is_blocked());
  EXPECT_FALSE(y.strided_desc().blocked);
  testing::expect_within(y, y64, bound, "whole");
}

TEST(Blocked, ThreeChannelInputGivesBlockedOutputOnly) {
  Tensor x = rand_f64({2, 3, 8, 8}, 3, -1, 1, false).to(DType::f32);
  Tensor w = rand_f64({16, 3, 3, 3}, 4, -1, 1, false).to(DType::f32);
  EXPECT_FALSE(blockable(x.shape(), x.dtype(), x.device()));
  Tensor y = ops::conv2d(x, w, Tensor(), {.padding = {1, 1}});
  EXPECT_EQ(y.is_blocked(), blocks_here());
  EXPECT_FALSE(x.is_blocked());
  testing::expect_within(
      y, ops::conv2d(x.to(DType::f64), w.to(DType::f64), Tensor(), {.padding = {1, 1}}),
      conv_bound(x, w, {.padding = {1, 1}}), "y");
  // f64 and CUDA-less paths never block.
  EXPECT_FALSE(ops::conv2d(x.to(DType::f64), w.to(DType::f64)).is_blocked());
}

// The weight and bias gradients of a convolution whose input has fewer
// channels than a block (a first layer: the row-major input, the blocked
// output gradient; kernels/cpu/conv.cpp's few_channel_weights) within direct
// convolution's bound of f64: N·OH·OW products per weight (plus 2u for the f32
// copies of x and dy), N·OH·OW terms per bias; strides, padding and dilation.
TEST(Blocked, FewChannelInputWeightGradientsWithinTheDirectBound) {
  for (const auto& [c, k, p] :
       {std::tuple{1, 32, ops::Conv2dParams{.padding = {1, 1}}},
        std::tuple{3, 16, ops::Conv2dParams{.stride = {2, 2}, .padding = {1, 1}}},
        std::tuple{3, 32, ops::Conv2dParams{.padding = {2, 1}, .dilation = {2, 2}}},
        std::tuple{2, 16, ops::Conv2dParams{.stride = {2, 1}}}}) {
    const std::string what = "c=" + std::to_string(c) + " k=" + std::to_string(k);
    const Tensor x64 = rand_f64({3, c, 11, 9}, 60, -1, 1, false);
    const Tensor w64 = rand_f64({k, c, 3, 3}, 61, -1, 1, false);
    const Tensor b64 = rand_f64({k}, 62, -1, 1, false);
    Tensor w = f32_leaf(w64), b = f32_leaf(b64);
    Tensor y = ops::conv2d(x64.to(DType::f32), w, b, p);
    EXPECT_EQ(y.is_blocked(), blocks_here()) << what;
    const Tensor dy = rand_f64(y.shape(), 63, -1, 1, false);
    // As the next layer's backward hands it over: blocked.
    y.backward(blocks_here() ? to_blocked(dy.to(DType::f32)) : dy.to(DType::f32));
    Tensor wr = w64.clone().set_requires_grad(true), br = b64.clone().set_requires_grad(true);
    ops::conv2d(x64, wr, br, p).backward(dy);
    const int64_t terms = 3 * y.size(2) * y.size(3);
    const testing::AbsSums mag = testing::abs_sums(
        [&](const std::vector<Tensor>& in) { return ops::conv2d(in[0], in[1], in[2], p); },
        {x64, w64, b64}, dy);
    testing::expect_within(w.grad(), wr.grad(),
                           ops::mul(mag.grads[1], testing::gamma_n(terms + 2, DType::f32)),
                           what + " dweight");
    testing::expect_within(b.grad(), br.grad(),
                           ops::mul(mag.grads[2], testing::gamma_n(terms + 1, DType::f32)),
                           what + " dbias");
  }
}

// conv -> batch norm -> relu -> (+ skip) -> conv, or with batch_norm_relu and
// add_relu fused, forward and every gradient, in f32 (blocked from the first
// convolution on) against f64.
//
// The tolerance is the first-order rounding-error bound of the whole chain:
// each value the f32 run computes passes through at most D roundings, each of
// relative size ≤ u, applied to sums whose terms are bounded by the same chain
// run on magnitudes (|x|, |w|, the absolute value of batch norm's Jacobian,
// relu passing everything), so its error is ≤ γ(D) times that magnitude chain
// (Higham, §3.5, for products of matrices). D counts the terms of each sum on
// the way: forward and, for gradients, forward plus the mirrored backward.
TEST(Blocked, ResidualBlockMatchesF64ForwardAndBackward) {
  const Shape xs{4, 16, 7, 6};
  const ops::Conv2dParams p1{.padding = {1, 1}}, p2{.stride = {2, 2}, .padding = {1, 1}};
  for (const auto& [training, fused] : {std::pair{true, false}, std::pair{false, false},
                                        std::pair{true, true}, std::pair{false, true}}) {
    SCOPED_TRACE(std::string(training ? "training" : "eval") + (fused ? ", fused relu" : ""));
    const std::vector<Tensor> in64{rand_f64(xs, 10), rand_f64({16, 16, 3, 3}, 11),
                                   rand_f64({16}, 12, 0.5, 1.5), rand_f64({16}, 13),
                                   rand_f64({32, 16, 3, 3}, 14)};
    std::vector<Tensor> in32;
    for (const Tensor& t : in64) in32.push_back(f32_leaf(t));
    Tensor loss_weights;  // (N, 32, 4, 3)
    auto run = [&](const std::vector<Tensor>& v, bool check_layout) {
      Tensor h = ops::conv2d(v[0], v[1], Tensor(), p1);
      Tensor rm = zeros({16}, {.dtype = v[0].dtype()}), rv = ones({16}, {.dtype = v[0].dtype()});
      Tensor b = fused ? Tensor() : ops::batch_norm(h, v[2], v[3], rm, rv, {.training = training});
      Tensor r = fused ? ops::batch_norm_relu(h, v[2], v[3], rm, rv, {.training = training})
                       : ops::relu(b);
      Tensor s = fused ? ops::add_relu(r, h) : ops::add(r, h);  // both blocked
      Tensor out = ops::conv2d(s, v[4], Tensor(), p2);
      if (check_layout && blocks_here()) {
        EXPECT_TRUE(h.is_blocked());
        EXPECT_TRUE(fused || b.is_blocked());
        EXPECT_TRUE(r.is_blocked());
        EXPECT_TRUE(s.is_blocked());
      }
      // A loss that weighs every output element differently.
      loss_weights = rand_f64(out.shape(), 15, -1, 1, false);
      ops::sum(ops::mul(ops::mul(out, out), loss_weights.to(out.dtype()))).backward();
      return std::vector<Tensor>{out, rm, rv};
    };
    const auto o64 = run(in64, false);
    const auto o32 = run(in32, true);

    // The chain on magnitudes, in f64, with batch norm's statistics taken
    // from the reference run.
    std::vector<Tensor> a;
    for (const Tensor& t : in64) {
      Tensor m = ops::abs(t.detach());
      m.set_requires_grad(true);
      a.push_back(m);
    }
    const Tensor h64 = ops::conv2d(in64[0].detach(), in64[1].detach(), Tensor(), p1);
    const Shape ch{1, 16, 1, 1};
    const Tensor mean =
        training ? ops::mean(h64, {0, 2, 3}, true) : zeros(ch, {.dtype = DType::f64});
    const Tensor var =
        training ? ops::var(h64, {0, 2, 3}, 0, true) : ones(ch, {.dtype = DType::f64});
    const Tensor invstd = ops::rsqrt(ops::add(var, 1e-5));
    const Tensor abs_xhat = ops::abs(ops::mul(ops::sub(h64, mean), invstd));
    const Tensor ha = ops::conv2d(a[0], a[1], Tensor(), p1);
    auto mean_c = [](const Tensor& t) { return ops::mean(t, {0, 2, 3}, true); };
    Tensor spread = ops::add(ha, ops::abs(mean));
    if (training)
      spread = ops::add(ops::add(spread, mean_c(ha)),
                        ops::mul(abs_xhat, mean_c(ops::mul(abs_xhat, ha))));
    const Tensor ba =
        ops::add(ops::mul(ops::mul(a[2].reshape(ch), invstd), spread), a[3].reshape(ch));
    const Tensor out_a = ops::conv2d(ops::add(ba, ha), a[4], Tensor(), p2);
    ops::sum(ops::mul(ops::mul(out_a, out_a), ops::abs(loss_weights))).backward();

    const kernels::Conv2dGeom g1 = testing::conv3x3_geom(4, 16, 16, 7, 6);
    const double growth = kernels::cpu::conv2d_impl_names(g1).find("wino") != std::string::npos
                              ? testing::kWinograd4x3Growth
                              : 1.0;
    const int64_t per_channel = 4 * 7 * 6, conv_terms = 16 * 9 + 2;
    const int64_t depth = conv_terms + (per_channel + 8) + 2 + conv_terms;
    const double fwd = growth * testing::gamma_n(depth, DType::f32);
    const double bwd = growth * testing::gamma_n(2 * depth + 4, DType::f32);
    double worst = testing::expect_within(o32[0], o64[0], ops::mul(out_a.detach(), fwd), "out");
    // Running statistics: 0.1 of the batch mean and of the unbiased variance.
    const double stat = testing::gamma_n(conv_terms + per_channel + 8, DType::f32);
    const double unbias = static_cast<double>(per_channel) / (per_channel - 1);
    const Tensor hb = ops::mean(ha.detach(), {0, 2, 3});
    testing::expect_within(o32[1], o64[1], training ? ops::mul(hb, 0.1 * stat) : zeros({16}),
                           "running_mean");
    const Tensor h2 = ops::mean(ops::mul(ha.detach(), ha.detach()), {0, 2, 3});
    testing::expect_within(o32[2], o64[2],
                           training ? ops::mul(h2, 0.1 * unbias * 4 * stat) : zeros({16}),
                           "running_var");
    const char* names[] = {"dx", "dconv1", "dgamma", "dbeta", "dconv2"};
    for (size_t i = 0; i < in64.size(); ++i) {
      ASSERT_TRUE(in32[i].grad().defined()) << names[i];
      worst = std::max(worst, testing::expect_within(in32[i].grad(), in64[i].grad(),
                                                     ops::mul(a[i].grad(), bwd), names[i]));
    }
    std::cout << "largest |error| / bound: " << worst << "\n";
  }
}

TEST(Blocked, BatchNormBlockedEqualsRowMajor) {
  const Tensor x = rand_f64({3, 32, 5, 4}, 20, -2, 3, false).to(DType::f32);
  const Tensor dy = rand_f64({3, 32, 5, 4}, 21, -1, 1, false).to(DType::f32);
  std::vector<Tensor> y, dx, dg;
  for (bool blocked : {false, true}) {
    Tensor xi = blocked ? to_blocked(x) : x.clone();
    EXPECT_EQ(xi.is_blocked(), blocked);
    xi.set_requires_grad(true);
    Tensor gamma = f32_leaf(rand_f64({32}, 22, 0.5, 1.5));
    Tensor out = ops::batch_norm(xi, gamma, Tensor(), Tensor(), Tensor(), {.training = true});
    EXPECT_EQ(out.is_blocked(), blocked);
    out.backward(dy);
    y.push_back(out);
    dx.push_back(xi.grad());
    dg.push_back(gamma.grad());
  }
  // Both are within the f32 bound of the exact result, so within twice it of each other.
  const testing::BatchNormBounds bound =
      testing::batch_norm_f32_bounds({.x = x.to(DType::f64),
                                      .weight = rand_f64({32}, 22, 0.5, 1.5, false),
                                      .dy = dy.to(DType::f64)});
  testing::expect_within(y[1], y[0], ops::mul(bound.y, 2.0), "y");
  testing::expect_within(dx[1], dx[0], ops::mul(bound.dx, 2.0), "dx");
  testing::expect_within(dg[1], dg[0], ops::mul(bound.dweight, 2.0), "dgamma");
}

TEST(Blocked, PoolingReadsAndWritesTheBlockedLayout) {
  const Tensor x = rand_f64({3, 32, 9, 8}, 30, -2, 3, false).to(DType::f32);
  for (const bool is_max : {true, false}) {
    const ops::Pool2dParams p{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
    std::vector<Tensor> y, dx;
    for (bool blocked : {false, true}) {
      Tensor xi = blocked ? to_blocked(x) : x.clone();
      xi.set_requires_grad(true);
      Tensor out = is_max ? ops::max_pool2d(xi, p) : ops::avg_pool2d(xi, p);
      EXPECT_EQ(out.is_blocked(), blocked);
      const Tensor dy = rand_f64(out.shape(), 31, -1, 1, false).to(DType::f32);
      out.backward(dy);
      EXPECT_EQ(xi.grad().is_blocked(), blocked);
      y.push_back(out);
      dx.push_back(xi.grad());
    }
    const std::string what = is_max ? "max" : "avg";
    expect_close(y[1], y[0], 0, 0, what + " y");
    expect_close(dx[1], dx[0], 1e-6, 1e-6, what + " dx");
  }
  // A row-major input gives a row-major output.
  Tensor plain = rand_f64({2, 16, 6, 6}, 32, -1, 1, false).to(DType::f32);
  EXPECT_FALSE(ops::max_pool2d(plain, {}).is_blocked());
}

// tcv's own blocked max pooling against the f64 reference loops: ties (values
// on a coarse grid: the first maximum of a window wins), NaN (the first NaN of
// a window wins and takes the gradient, as in PyTorch), overlapping windows,
// padding and ceil mode's overhanging windows. The maxima are exact. A dx
// element sums the dy of at most 6 windows (the 3x2 kernel at stride 1), |dy|
// < 1, so f32 is within γ₅·6 of f64 (Higham §3.1).
TEST(Blocked, MaxPoolingMatchesTheReferenceWithTiesNaNAndCeilMode) {
  if (!blocks_here()) GTEST_SKIP() << "no blocked f32 layout on this CPU";
  std::vector<double> v = rand_f64({2, 32, 9, 7}, 50, -3, 3, false).to_vector<double>();
  for (double& e : v) e = std::round(e * 2.0) / 2.0;  // many ties
  for (size_t i : {5u, 100u, 101u, 777u, 2000u}) v[i] = std::nan("");
  const Tensor x64 = from_vector<double>(v, {2, 32, 9, 7});
  for (const ops::Pool2dParams& p :
       {ops::Pool2dParams{},
        ops::Pool2dParams{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}},
        ops::Pool2dParams{.kernel = {3, 3}, .stride = {2, 2}, .ceil_mode = true},
        ops::Pool2dParams{.kernel = {3, 2}, .stride = {1, 1}, .padding = {1, 0}}}) {
    const std::string what = "kernel " + std::to_string(p.kernel[0]) + "x" +
                             std::to_string(p.kernel[1]) + (p.ceil_mode ? " ceil" : "");
    Tensor xr = x64.clone().set_requires_grad(true);
    Tensor xb = to_blocked(x64.to(DType::f32)).set_requires_grad(true);
    Tensor yr = ops::max_pool2d(xr, p), yb = ops::max_pool2d(xb, p);
    ASSERT_TRUE(yb.is_blocked()) << what;
    const Tensor dy = rand_f64(yr.shape(), 51, -1, 1, false).to(DType::f32);
    yr.backward(dy.to(DType::f64));
    yb.backward(dy);
    const std::vector<double> want = yr.to_vector<double>(),
                              got = yb.to(DType::f64).to_vector<double>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))
          << what << " y[" << i << "] = " << got[i] << ", reference " << want[i];
    testing::expect_within(xb.grad(), xr.grad(), full({1}, 6 * testing::gamma_n(5, DType::f32)),
                           what + " dx");
  }
}

TEST(Blocked, ElementwiseOpsMixLayouts) {
  const Tensor a64 = rand_f64({2, 16, 3, 3}, 30, -1, 1, false);
  const Tensor b64 = rand_f64({2, 16, 3, 3}, 31, -1, 1, false);
  const Tensor a = to_blocked(a64.to(DType::f32)), b = b64.to(DType::f32);
  ASSERT_TRUE(a.is_blocked());
  // Equal shapes: the row-major operand is converted, the result stays blocked.
  Tensor s = ops::sub(b, a);
  EXPECT_TRUE(s.is_blocked());
  expect_close(s, ops::sub(b64, a64), 1e-6, 1e-6, "sub");
  Tensor c = ops::clamp(a, -0.5, 0.25);
  EXPECT_TRUE(c.is_blocked());
  expect_close(c, ops::clamp(a64, -0.5, 0.25), 1e-7, 1e-7, "clamp");
  // Broadcasting and comparisons read row-major.
  const Tensor bias = rand_f64({1, 16, 1, 1}, 32, -1, 1, false);
  Tensor a2 = to_blocked(a64.to(DType::f32));
  expect_close(ops::add(a2, bias.to(DType::f32)), ops::add(a64, bias), 1e-6, 1e-6, "broadcast");
  EXPECT_FALSE(a2.is_blocked());
  Tensor a3 = to_blocked(a64.to(DType::f32));
  EXPECT_EQ(ops::gt(a3, b).to_vector<bool>(), ops::gt(a64, b64).to_vector<bool>());
  // In place, with a blocked and with a row-major operand.
  Tensor d = to_blocked(a64.to(DType::f32));
  d.add_(to_blocked(b), 2.0);
  EXPECT_TRUE(d.is_blocked());
  d.mul_(b);
  EXPECT_TRUE(d.is_blocked());
  expect_close(d, ops::mul(ops::add(a64, b64, 2.0), b64), 1e-6, 1e-6, "in place");
  d.fill_(1.5);  // writes through the row-major view
  EXPECT_FALSE(d.is_blocked());
  EXPECT_EQ(ops::sum(d).item(), 1.5 * 288);
}

TEST(Blocked, ConversionsAndErrors) {
  const Tensor x = rand_f64({2, 32, 2, 3}, 40, -1, 1, false).to(DType::f32);
  Tensor b = to_blocked(x);
  EXPECT_TRUE(to_blocked(b).same(b));
  EXPECT_EQ(b.to_vector<float>(), x.to_vector<float>());  // back to row-major: bitwise
  EXPECT_THROW(to_blocked(zeros({2, 3, 4, 4})), Error);   // C not in whole blocks (of 8 or 16)
  EXPECT_THROW(to_blocked(zeros({2, 16, 4, 4}, {.dtype = DType::f64})), Error);
  EXPECT_THROW(empty_blocked({16, 4, 4}), Error);
  try {
    empty_blocked({1, 20, 2, 2});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("(1, 20, 2, 2)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("multiple of " + std::to_string(kernels::cpu::channel_block())),
              std::string::npos)
        << msg;
  }
  // The block is what this CPU's convolutions compute in: 8 (AVX2) or 16 (AVX-512).
  EXPECT_TRUE(kernels::cpu::channel_block() == 8 || kernels::cpu::channel_block() == 16);
  EXPECT_EQ(blocks_here(), kernels::cpu::channel_block() > 0);
}

}  // namespace
}  // namespace tcv
