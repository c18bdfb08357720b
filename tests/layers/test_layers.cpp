// Each layer: output shape and values on small inputs (by hand and against the
// functional op), printing as PyTorch, and the initialisers' distributions.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "layers/layers.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::expect_close;

std::vector<float> arange_f(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

struct Stats {
  double mean = 0, std = 0, max_abs = 0;
};
Stats stats(const Tensor& t) {
  const auto v = t.to_vector<double>();
  Stats s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) {
    s.std += (x - s.mean) * (x - s.mean);
    s.max_abs = std::max(s.max_abs, std::abs(x));
  }
  s.std = std::sqrt(s.std / static_cast<double>(v.size()));
  return s;
}

// ---------------------------------------------------------------- Conv2d

TEST(Conv2d, PaddedOnesByHand) {
  nn::Conv2d conv(1, 1, 3, {.padding = 1});
  conv.weight.detach().fill_(1.0);
  conv.bias.detach().fill_(0.5);
  Tensor y = conv(ones({1, 1, 3, 3}));
  ASSERT_EQ(y.shape(), (Shape{1, 1, 3, 3}));
  // Each output sums the in-bounds part of its 3x3 window, plus the bias.
  EXPECT_EQ(y.to_vector<float>(),
            (std::vector<float>{4.5f, 6.5f, 4.5f, 6.5f, 9.5f, 6.5f, 4.5f, 6.5f, 4.5f}));
}

TEST(Conv2d, MatchesFunctionalOpWithEveryOption) {
  manual_seed(1);
  nn::Conv2d conv(4, 6, {3, 2},
                  {.stride = {2, 1}, .padding = {1, 0}, .dilation = {1, 2}, .groups = 2});
  EXPECT_EQ(conv.weight.shape(), (Shape{6, 2, 3, 2}));
  EXPECT_EQ(conv.bias.shape(), (Shape{6}));
  Tensor x = randn({2, 4, 7, 6});
  Tensor y = conv(x);
  // H: (7 + 2 - 3) / 2 + 1 = 4; W: (6 - 2·(2-1) - 1) / 1 + 1 = 4.
  EXPECT_EQ(y.shape(), (Shape{2, 6, 4, 4}));
  ops::Conv2dParams p;
  p.stride = {2, 1};
  p.padding = {1, 0};
  p.dilation = {1, 2};
  p.groups = 2;
  expect_close(y, ops::conv2d(x, conv.weight, conv.bias, p), 0, 0, "conv2d layer vs op");
  nn::Conv2d nobias(3, 8, 1, {.bias = false});
  EXPECT_FALSE(nobias.bias.defined());
  EXPECT_EQ(nobias.named_parameters().size(), 1u);
  EXPECT_EQ(nobias(ones({1, 3, 5, 5})).shape(), (Shape{1, 8, 5, 5}));
  EXPECT_THROW(nn::Conv2d(3, 8, 3, {.groups = 2}), Error);
}

TEST(Conv2d, DefaultInitIsUniformOverInverseSqrtFanIn) {
  manual_seed(7);
  nn::Conv2d conv(32, 64, 3);
  const double bound = 1.0 / std::sqrt(32.0 * 9.0);
  const Stats w = stats(conv.weight), b = stats(conv.bias);
  EXPECT_LE(w.max_abs, bound);
  EXPECT_GT(w.max_abs, 0.99 * bound);
  EXPECT_NEAR(w.std, bound / std::sqrt(3.0), 0.02 * bound);  // U(-b, b) has std b/sqrt(3)
  EXPECT_NEAR(w.mean, 0.0, 0.02 * bound);
  EXPECT_LE(b.max_abs, bound);
  EXPECT_GT(b.max_abs, 0.5 * bound);
  // Seeded: the same seed gives the same weights, another seed others.
  manual_seed(7);
  nn::Conv2d again(32, 64, 3);
  EXPECT_EQ(again.weight.to_vector<float>(), conv.weight.to_vector<float>());
  nn::Conv2d other(32, 64, 3);
  EXPECT_NE(other.weight.to_vector<float>(), conv.weight.to_vector<float>());
}

// ---------------------------------------------------------------- Linear

TEST(Linear, ValuesByHandAndInit) {
  nn::Linear lin(3, 2);
  lin.weight.detach().copy_(from_vector<float>({1, 2, 3, -1, 0, 1}, {2, 3}));
  lin.bias.detach().copy_(from_vector<float>({0.5f, -0.5f}));
  Tensor y = lin(from_vector<float>({1, 1, 1, 2, 0, -1}, {2, 3}));
  ASSERT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{6.5f, -0.5f, -0.5f, -3.5f}));
  expect_close(lin(ones({4, 5, 3})), ops::linear(ones({4, 5, 3}), lin.weight, lin.bias), 0, 0);

  manual_seed(3);
  nn::Linear big(400, 300);
  const double bound = 1.0 / std::sqrt(400.0);
  const Stats w = stats(big.weight), b = stats(big.bias);
  EXPECT_LE(w.max_abs, bound);
  EXPECT_GT(w.max_abs, 0.99 * bound);
  EXPECT_NEAR(w.std, bound / std::sqrt(3.0), 0.02 * bound);
  EXPECT_LE(b.max_abs, bound);
  EXPECT_FALSE(nn::Linear(3, 2, {.bias = false}).bias.defined());
}

// ---------------------------------------------------------------- BatchNorm2d

TEST(BatchNorm2d, TrainingUsesBatchStatsAndUpdatesRunningStats) {
  nn::BatchNorm2d bn(2);
  EXPECT_EQ(bn.weight.to_vector<float>(), (std::vector<float>{1, 1}));
  EXPECT_EQ(bn.bias.to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_EQ(bn.running_var.to_vector<float>(), (std::vector<float>{1, 1}));
  // Channel 0 holds 0..3, channel 1 holds 10, 10, 20, 20 (N=2, H=1, W=2).
  Tensor x = from_vector<float>({0, 1, 10, 10, 2, 3, 20, 20}, {2, 2, 1, 2});
  Tensor y = bn(x);
  ASSERT_EQ(y.shape(), x.shape());
  // mean 1.5, biased var 1.25; mean 15, biased var 25.
  const double s0 = std::sqrt(1.25 + 1e-5), s1 = std::sqrt(25.0 + 1e-5);
  expect_close(y,
               from_vector<double>(
                   {-1.5 / s0, -0.5 / s0, -5 / s1, -5 / s1, 0.5 / s0, 1.5 / s0, 5 / s1, 5 / s1},
                   {2, 2, 1, 2}),
               1e-5, 1e-5, "bn train output");
  // Running: 0.9·old + 0.1·batch, with the unbiased variance (5/3 and 100/3).
  expect_close(bn.running_mean, from_vector<double>({0.15, 1.5}), 1e-6, 1e-6, "running_mean");
  expect_close(bn.running_var,
               from_vector<double>({0.9 + 0.1 * 5.0 / 3.0, 0.9 + 0.1 * 100.0 / 3.0}), 1e-5, 1e-6,
               "running_var");
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  bn(x);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
}

TEST(BatchNorm2d, EvalUsesRunningStats) {
  nn::BatchNorm2d bn(2, {.eps = 1e-8});
  bn.running_mean.copy_(from_vector<float>({1, -1}));
  bn.running_var.copy_(from_vector<float>({4, 0.25}));
  bn.weight.detach().copy_(from_vector<float>({2, 1}));
  bn.bias.detach().copy_(from_vector<float>({0, 10}));
  bn.eval();
  Tensor y = bn(from_vector<float>({3, 5, 0, 1}, {1, 2, 1, 2}));
  // (x - m) / sqrt(v) · w + b: (3-1)/2·2 = 2, (5-1)/2·2 = 4, (0+1)/0.5+10 = 12, (1+1)/0.5+10 = 14.
  expect_close(y, from_vector<float>({2, 4, 12, 14}, {1, 2, 1, 2}), 1e-5, 1e-6, "bn eval");
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 0);
  EXPECT_EQ(bn.running_mean.to_vector<float>(), (std::vector<float>{1, -1}));
  EXPECT_THROW(bn(ones({1, 3, 2, 2})), Error);
}

TEST(BatchNorm2d, WithoutTrackingOrAffine) {
  nn::BatchNorm2d bn(1, {.affine = false, .track_running_stats = false});
  EXPECT_TRUE(bn.state_dict().empty());
  bn.eval();  // still normalises with the batch's statistics
  Tensor y = bn(from_vector<float>({1, 3}, {1, 1, 1, 2}));
  expect_close(y, from_vector<float>({-1, 1}, {1, 1, 1, 2}), 1e-4, 1e-4, "bn no tracking");
}

// ---------------------------------------------------------------- activations, pooling

TEST(ReLU, Values) {
  nn::ReLU relu;
  EXPECT_EQ(relu(from_vector<float>({-1, 0, 2.5f})).to_vector<float>(),
            (std::vector<float>{0, 0, 2.5f}));
}

TEST(Pooling, MaxAvgAdaptiveValues) {
  Tensor x = from_vector(arange_f(16), {1, 1, 4, 4});
  nn::MaxPool2d max2(2);
  EXPECT_EQ(max2.options.stride, nn::Size2(2));
  EXPECT_EQ(max2(x).to_vector<float>(), (std::vector<float>{5, 7, 13, 15}));
  EXPECT_EQ(max2(x).shape(), (Shape{1, 1, 2, 2}));
  nn::MaxPool2d max3(3, {.stride = 2, .padding = 1});
  EXPECT_EQ(max3(x).to_vector<float>(), (std::vector<float>{5, 7, 13, 15}));
  nn::AvgPool2d avg2(2);
  EXPECT_EQ(avg2(x).to_vector<float>(), (std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f}));
  nn::AvgPool2d avg3(3, {.stride = 1, .padding = 1, .count_include_pad = false});
  Tensor a3 = avg3(x);
  EXPECT_EQ(a3.shape(), (Shape{1, 1, 4, 4}));
  EXPECT_FLOAT_EQ(a3.to_vector<float>()[0], (0 + 1 + 4 + 5) / 4.0f);
  nn::AdaptiveAvgPool2d gap(1);
  EXPECT_EQ(gap(x).shape(), (Shape{1, 1, 1, 1}));
  EXPECT_FLOAT_EQ(gap(x).item<float>(), 7.5f);
  nn::AdaptiveAvgPool2d ap2({2, 2});
  EXPECT_EQ(ap2(x).to_vector<float>(), avg2(x).to_vector<float>());
  Tensor r = randn({2, 3, 9, 7});
  expect_close(nn::AdaptiveAvgPool2d({3, 2})(r), ops::adaptive_avg_pool2d(r, {3, 2}), 0, 0);
  EXPECT_THROW(nn::MaxPool2d(2, {.padding = 2}), Error);
}

// ---------------------------------------------------------------- Dropout, Flatten

TEST(Dropout, TrainingZeroesAndScalesEvalIsIdentity) {
  manual_seed(5);
  nn::Dropout drop(0.25);
  Tensor x = ones({100, 100});
  const auto v = drop(x).to_vector<float>();
  int64_t zeros_n = 0;
  for (float e : v) {
    if (e == 0.0f) {
      ++zeros_n;
    } else {
      EXPECT_FLOAT_EQ(e, 1.0f / 0.75f);
    }
  }
  EXPECT_NEAR(static_cast<double>(zeros_n) / 10000.0, 0.25, 0.03);
  drop.eval();
  EXPECT_EQ(drop(x).to_vector<float>(), x.to_vector<float>());
  EXPECT_THROW(nn::Dropout(1.5), Error);
}

TEST(Flatten, Shapes) {
  Tensor x = from_vector(arange_f(120), {2, 3, 4, 5});
  Tensor y = nn::Flatten()(x);
  EXPECT_EQ(y.shape(), (Shape{2, 60}));
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(nn::Flatten(0, 1)(x).shape(), (Shape{6, 4, 5}));
}

// ---------------------------------------------------------------- Sequential

TEST(Sequential, ChainsAndNamesByPosition) {
  auto lin1 = std::make_shared<nn::Linear>(3, 4);
  auto lin2 = std::make_shared<nn::Linear>(4, 2);
  nn::Sequential seq{lin1, std::make_shared<nn::ReLU>()};
  seq.push_back(lin2);
  EXPECT_EQ(seq.size(), 3u);
  Tensor x = randn({5, 3});
  expect_close(seq(x), (*lin2)(ops::relu((*lin1)(x))), 0, 0, "sequential chain");
  EXPECT_EQ(seq.state_dict()[2].first, "2.weight");
  EXPECT_TRUE(seq.at<nn::Linear>(2) == lin2);
  EXPECT_THROW(seq.at<nn::Linear>(1), Error);
  EXPECT_THROW(seq[3], Error);
  EXPECT_THROW(seq.push_back(nullptr), Error);
}

TEST(Sequential, FusesBatchNormThenReLUOrReLU6) {
  auto bn = std::make_shared<nn::BatchNorm2d>(3);
  nn::init::uniform_(bn->weight, 0.5, 1.5);
  nn::init::uniform_(bn->bias, -0.5, 0.5);
  nn::Sequential fused{bn, std::make_shared<nn::ReLU>()};
  nn::Sequential six{bn, std::make_shared<nn::ReLU6>()};
  for (bool training : {true, false}) {
    fused.train(training);
    six.train(training);
    Tensor x = randn({2, 3, 4, 5});
    x.set_requires_grad(true);
    // The reference runs the two layers apart: batch statistics in training
    // (without touching the running ones again), running statistics in eval.
    const Tensor rm = training ? Tensor() : bn->running_mean.clone();
    const Tensor rv = training ? Tensor() : bn->running_var.clone();
    Tensor y = fused(x);
    EXPECT_EQ(y.grad_fn()->name(), "batch_norm_relu");  // one node for both layers
    Tensor ref =
        ops::relu(ops::batch_norm(x, bn->weight, bn->bias, rm, rv, {.training = training}));
    expect_close(y, ref, 0, 0, training ? "fused train" : "fused eval");
    Tensor y6 = six(x);
    EXPECT_EQ(y6.grad_fn()->name(), "batch_norm_relu6");
    Tensor ref6 =
        ops::relu6(ops::batch_norm(x, bn->weight, bn->bias, rm, rv, {.training = training}));
    expect_close(y6, ref6, 0, 0, training ? "fused relu6 train" : "fused relu6 eval");
  }
}

TEST(Conv2d, ForwardReluIsReluOfForward) {
  // f64 runs the same convolution fused or not (im2col + dgemm, then the
  // clamp), so the values and gradients are equal; f32 fuses through oneDNN's
  // post-op (tests/engine/test_conv.cpp bounds it).
  auto conv = std::make_shared<nn::Conv2d>(3, 5, 3, nn::Conv2dOptions{.padding = 1});
  conv->to(DType::f64);
  Tensor x = randn({2, 3, 6, 7}, {.dtype = DType::f64});
  x.set_requires_grad(true);
  Tensor y = conv->forward_relu(x);
  EXPECT_EQ(y.grad_fn()->name(), "conv2d_relu");  // one node for both
  Tensor ref = ops::relu(conv->forward(x));
  expect_close(y, ref, 0, 0, "fused conv relu");
  EXPECT_GT(ops::sum(ops::eq(y, 0.0)).item(), 0.0);
  Tensor xr = x.detach().clone();
  xr.set_requires_grad(true);
  const Tensor dy = randn(y.shape(), {.dtype = DType::f64});
  y.backward(dy);
  const Tensor gw = conv->weight.grad().clone();
  conv->weight.set_grad(Tensor());
  ops::relu(conv->forward(xr)).backward(dy);
  expect_close(x.grad(), xr.grad(), 0, 0, "dx");
  expect_close(gw, conv->weight.grad(), 0, 0, "dweight");
}

TEST(Sequential, FusesConv2dThenReLU) {
  auto conv = std::make_shared<nn::Conv2d>(3, 5, 3, nn::Conv2dOptions{.padding = 1});
  nn::Sequential fused{conv, std::make_shared<nn::ReLU>()};
  Tensor x = randn({2, 3, 6, 7});
  x.set_requires_grad(true);
  EXPECT_EQ(fused(x).grad_fn()->name(), "conv2d_relu");  // one node for both layers
  // A Conv2d alone, or a ReLU after anything else, runs as before.
  nn::Sequential alone{conv};
  EXPECT_EQ(alone(x).grad_fn()->name(), "conv2d");
  nn::Sequential other{std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::ReLU>()};
  EXPECT_EQ(other(x).grad_fn()->name(), "relu");
}

// The bytes allocated at the high-water mark of backward() above what was live
// when it started, for 2 * relu(conv(x)) fused or not, with nothing but the
// graph holding the activation.
int64_t backward_peak_growth(nn::Conv2d& conv, const Tensor& x, bool fused) {
  Tensor y = fused ? conv.forward_relu(x) : ops::relu(conv.forward(x));
  const Tensor dz = ones(y.shape());
  Tensor z = ops::mul(y, 2.0);
  y = Tensor();
  CpuAllocator::instance().reset_peak();
  const int64_t before = CpuAllocator::instance().stats().allocated;
  z.backward(dz);
  return CpuAllocator::instance().stats().peak_allocated - before;
}

TEST(Sequential, FusedConvReluFreesItsOutputBeforeTheConvolutionsBackward) {
  // A separate relu node frees the activation after its backward, before the
  // convolution's backward allocates dx and dweight; the fused node must not
  // hold it longer (it would add a whole activation to every step's peak).
  auto conv = std::make_shared<nn::Conv2d>(16, 16, 3, nn::Conv2dOptions{.padding = 1});
  Tensor x = randn({2, 16, 32, 32});
  x.set_requires_grad(true);
  const int64_t unfused = backward_peak_growth(*conv, x, false);
  const int64_t fused = backward_peak_growth(*conv, x, true);
  EXPECT_GT(unfused, 0);
  EXPECT_LE(fused, unfused) << "the activation is " << 2 * 16 * 32 * 32 * 4 << " bytes";
}

// ---------------------------------------------------------------- printing

TEST(Layers, PrintLikePyTorch) {
  EXPECT_EQ(nn::Conv2d(4, 8, {3, 5},
                       {.stride = 2, .padding = {1, 2}, .dilation = 2, .groups = 2, .bias = false})
                .str(),
            "Conv2d(4, 8, kernel_size=(3, 5), stride=(2, 2), padding=(1, 2), dilation=(2, 2), "
            "groups=2, bias=False)");
  EXPECT_EQ(nn::Conv2d(3, 64, 1, {.bias = false}).str(),
            "Conv2d(3, 64, kernel_size=(1, 1), stride=(1, 1), bias=False)");
  EXPECT_EQ(nn::MaxPool2d({2, 3}).str(),
            "MaxPool2d(kernel_size=(2, 3), stride=(2, 3), padding=0, dilation=1, ceil_mode=False)");
  EXPECT_EQ(nn::MaxPool2d(3, {.stride = 2, .padding = 1}).str(),
            "MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=False)");
  EXPECT_EQ(nn::AvgPool2d(2).str(), "AvgPool2d(kernel_size=2, stride=2, padding=0)");
  EXPECT_EQ(nn::AdaptiveAvgPool2d(1).str(), "AdaptiveAvgPool2d(output_size=(1, 1))");
  EXPECT_EQ(nn::Dropout().str(), "Dropout(p=0.5, inplace=False)");
  EXPECT_EQ(nn::Flatten().str(), "Flatten(start_dim=1, end_dim=-1)");
  EXPECT_EQ(nn::BatchNorm2d(4).str(),
            "BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
  EXPECT_EQ(nn::Upsample({.scale_factor = 2}).str(), "Upsample(scale_factor=2.0, mode=nearest)");
  EXPECT_EQ(nn::Upsample({.size = {8, 8}, .mode = ops::InterpMode::bilinear, .align_corners = true})
                .str(),
            "Upsample(size=(8, 8), mode=bilinear)");
  EXPECT_EQ(nn::repr_float(1e-3), "0.001");
  EXPECT_EQ(nn::repr_float(1e16), "1e+16");
  EXPECT_EQ(nn::repr_float(123.0), "123.0");
  EXPECT_THROW(nn::Upsample({}), Error);
  EXPECT_THROW(nn::Upsample({.size = 4, .scale_factor = 2}), Error);
  EXPECT_THROW(nn::Upsample({.scale_factor = 2, .align_corners = true}), Error);
}

// ---------------------------------------------------------------- init

TEST(Init, GainsAndFans) {
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain(nn::init::Nonlinearity::relu), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain(nn::init::Nonlinearity::tanh), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain(nn::init::Nonlinearity::leaky_relu, std::sqrt(5.0)),
                   std::sqrt(1.0 / 3.0));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain(nn::init::Nonlinearity::linear), 1.0);
  const auto [fi, fo] = nn::init::fan_in_and_fan_out(empty({64, 32, 3, 5}));
  EXPECT_EQ(fi, 32 * 15);
  EXPECT_EQ(fo, 64 * 15);
  EXPECT_THROW(nn::init::fan_in_and_fan_out(empty({3})), Error);
}

TEST(Init, Distributions) {
  manual_seed(11);
  Tensor w = empty({128, 64, 3, 3});
  nn::init::kaiming_normal_(w, 0.0, nn::init::FanMode::fan_out, nn::init::Nonlinearity::relu);
  Stats s = stats(w);
  EXPECT_NEAR(s.std, std::sqrt(2.0 / (128 * 9)), 0.01 * std::sqrt(2.0 / (128 * 9)));
  EXPECT_NEAR(s.mean, 0.0, 0.002);
  nn::init::kaiming_normal_(w);  // fan_in, leaky_relu(0) = relu gain
  EXPECT_NEAR(stats(w).std, std::sqrt(2.0 / (64 * 9)), 0.01 * std::sqrt(2.0 / (64 * 9)));

  Tensor u = empty({200, 300});
  nn::init::kaiming_uniform_(u, 0.0, nn::init::FanMode::fan_in, nn::init::Nonlinearity::relu);
  const double kb = std::sqrt(6.0 / 300.0);
  s = stats(u);
  EXPECT_LE(s.max_abs, kb);
  EXPECT_GT(s.max_abs, 0.99 * kb);
  nn::init::xavier_uniform_(u, 2.0);
  const double xb = 2.0 * std::sqrt(6.0 / 500.0);
  s = stats(u);
  EXPECT_LE(s.max_abs, xb);
  EXPECT_GT(s.max_abs, 0.99 * xb);
  nn::init::xavier_normal_(u);
  EXPECT_NEAR(stats(u).std, std::sqrt(2.0 / 500.0), 0.02 * std::sqrt(2.0 / 500.0));
  nn::init::normal_(u, 3.0, 0.5);
  s = stats(u);
  EXPECT_NEAR(s.mean, 3.0, 0.01);
  EXPECT_NEAR(s.std, 0.5, 0.01);
  nn::init::uniform_(u, 2.0, 4.0);
  s = stats(u);
  EXPECT_NEAR(s.mean, 3.0, 0.01);
  EXPECT_LE(s.max_abs, 4.0);
  nn::init::constant_(u, 0.75);
  EXPECT_EQ(stats(u).mean, 0.75);
  // Initialising a parameter records nothing in the graph.
  Tensor p = empty({4, 4});
  p.set_requires_grad(true);
  nn::init::kaiming_uniform_(p);
  EXPECT_TRUE(p.is_leaf());
  // A private generator gives reproducible draws independent of the default one.
  Generator g1(42), g2(42);
  Tensor a = empty({10, 10}), b = empty({10, 10});
  nn::init::kaiming_normal_(a, 0, nn::init::FanMode::fan_in, nn::init::Nonlinearity::relu, &g1);
  nn::init::kaiming_normal_(b, 0, nn::init::FanMode::fan_in, nn::init::Nonlinearity::relu, &g2);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
}

}  // namespace
}  // namespace tcv
