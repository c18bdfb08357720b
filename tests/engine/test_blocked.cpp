// oneDNN's nChw16c layout kept between CPU f32 layers: convolutions write it,
// batch norm and elementwise ops keep it, and every other access converts the
// storage back to row-major first. Each test runs a computation through blocked
// tensors and checks its values (and gradients) against the same computation
// in f64, where nothing is ever blocked.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "kernels/cpu/conv.h"
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

TEST(Blocked, ConvolutionWritesTheBlockedLayoutAndReadsBackRowMajor) {
  Tensor x = rand_f64({2, 16, 6, 5}, 1, -1, 1, false).to(DType::f32);
  Tensor w = rand_f64({32, 16, 3, 3}, 2, -1, 1, false).to(DType::f32);
  Tensor y = ops::conv2d(x, w, Tensor(), {.padding = {1, 1}});
  ASSERT_TRUE(y.is_blocked());
  EXPECT_TRUE(y.k_any().blocked);
  const Tensor y64 = ops::conv2d(x.to(DType::f64), w.to(DType::f64), Tensor(), {.padding = {1, 1}});
  // A view reads row-major values, converting the storage on the way.
  Tensor corner = y.narrow(1, 17, 2).narrow(2, 4, 2);
  expect_close(corner, y64.narrow(1, 17, 2).narrow(2, 4, 2), 1e-5, 1e-5, "view");
  EXPECT_FALSE(y.is_blocked());
  EXPECT_FALSE(y.k().blocked);
  expect_close(y, y64, 1e-5, 1e-5, "whole");
}

TEST(Blocked, ThreeChannelInputGivesBlockedOutputOnly) {
  Tensor x = rand_f64({2, 3, 8, 8}, 3, -1, 1, false).to(DType::f32);
  Tensor w = rand_f64({16, 3, 3, 3}, 4, -1, 1, false).to(DType::f32);
  EXPECT_FALSE(blockable(x.shape(), x.dtype(), x.device()));
  Tensor y = ops::conv2d(x, w, Tensor(), {.padding = {1, 1}});
  EXPECT_TRUE(y.is_blocked());
  EXPECT_FALSE(x.is_blocked());
  expect_close(y, ops::conv2d(x.to(DType::f64), w.to(DType::f64), Tensor(), {.padding = {1, 1}}),
               1e-5, 1e-5, "y");
  // f64 and CUDA-less paths never block.
  EXPECT_FALSE(ops::conv2d(x.to(DType::f64), w.to(DType::f64)).is_blocked());
}

// conv -> batch norm -> relu -> (+ skip) -> conv, or with batch_norm_relu and
// add_relu fused, forward and every gradient, in f32 (blocked from the first
// convolution on) against f64.
TEST(Blocked, ResidualBlockMatchesF64ForwardAndBackward) {
  for (const auto& [training, fused] : {std::pair{true, false}, std::pair{false, false},
                                        std::pair{true, true}, std::pair{false, true}}) {
    SCOPED_TRACE(std::string(training ? "training" : "eval") + (fused ? ", fused relu" : ""));
    const std::vector<Tensor> in64{rand_f64({4, 16, 7, 6}, 10), rand_f64({16, 16, 3, 3}, 11),
                                   rand_f64({16}, 12, 0.5, 1.5), rand_f64({16}, 13),
                                   rand_f64({32, 16, 3, 3}, 14)};
    std::vector<Tensor> in32;
    for (const Tensor& t : in64) in32.push_back(f32_leaf(t));
    auto run = [&](const std::vector<Tensor>& v, bool check_layout) {
      Tensor h = ops::conv2d(v[0], v[1], Tensor(), {.padding = {1, 1}});
      Tensor rm = zeros({16}, {.dtype = v[0].dtype()}), rv = ones({16}, {.dtype = v[0].dtype()});
      Tensor b = fused ? Tensor() : ops::batch_norm(h, v[2], v[3], rm, rv, training, 0.1, 1e-5);
      Tensor r =
          fused ? ops::batch_norm_relu(h, v[2], v[3], rm, rv, training, 0.1, 1e-5) : ops::relu(b);
      Tensor s = fused ? ops::add_relu(r, h) : ops::add(r, h);  // both blocked
      Tensor out = ops::conv2d(s, v[4], Tensor(), {.stride = {2, 2}, .padding = {1, 1}});
      if (check_layout) {
        EXPECT_TRUE(h.is_blocked());
        EXPECT_TRUE(fused || b.is_blocked());
        EXPECT_TRUE(r.is_blocked());
        EXPECT_TRUE(s.is_blocked());
      }
      // A loss that weighs every output element differently.
      const Tensor wts = rand_f64(out.shape(), 15, -1, 1, false).to(out.dtype());
      ops::sum(ops::mul(ops::mul(out, out), wts)).backward();
      return std::vector<Tensor>{out, rm, rv};
    };
    const auto o64 = run(in64, false);
    const auto o32 = run(in32, true);
    expect_close(o32[0], o64[0], 1e-4, 1e-4, "out");
    expect_close(o32[1], o64[1], 1e-5, 1e-5, "running_mean");
    expect_close(o32[2], o64[2], 1e-5, 1e-5, "running_var");
    const char* names[] = {"dx", "dconv1", "dgamma", "dbeta", "dconv2"};
    for (size_t i = 0; i < in64.size(); ++i) {
      ASSERT_TRUE(in32[i].grad().defined()) << names[i];
      expect_close(in32[i].grad(), in64[i].grad(), 1e-3, 2e-4, names[i]);
    }
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
    Tensor out = ops::batch_norm(xi, gamma, Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
    EXPECT_EQ(out.is_blocked(), blocked);
    out.backward(dy);
    y.push_back(out);
    dx.push_back(xi.grad());
    dg.push_back(gamma.grad());
  }
  expect_close(y[1], y[0], 1e-6, 1e-5, "y");
  expect_close(dx[1], dx[0], 1e-6, 1e-5, "dx");
  expect_close(dg[1], dg[0], 1e-5, 1e-5, "dgamma");
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
  EXPECT_THROW(to_blocked(zeros({2, 3, 4, 4})), Error);   // C not a multiple of 16
  EXPECT_THROW(to_blocked(zeros({2, 16, 4, 4}, {.dtype = DType::f64})), Error);
  EXPECT_THROW(empty_blocked({16, 4, 4}), Error);
  try {
    empty_blocked({1, 24, 2, 2});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(1, 24, 2, 2)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tcv
