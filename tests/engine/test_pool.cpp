// Pooling beyond the op table's cases (tests/ops/cases_pool.cpp, which check
// gradients and the oneDNN f32 path against the exact result): known values,
// PyTorch's output-size rules and divisors, errors.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "kernels/base.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::expect_close;
using testing::rand_f64;

Tensor plane_4x4() {
  return arange(0, 16, 1, {.dtype = DType::f32}).reshape({1, 1, 4, 4});
}

TEST(Pool, MaxKnownValuesAndArgmaxRouting) {
  Tensor x = plane_4x4();
  x.set_requires_grad(true);
  Tensor y = ops::max_pool2d(x, {.kernel = {2, 2}, .stride = {2, 2}});
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{5, 7, 13, 15}));
  y.backward(from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2}));
  // Each dy lands on its window's maximum, everything else gets zero.
  std::vector<float> expect(16, 0.f);
  expect[5] = 1, expect[7] = 2, expect[13] = 3, expect[15] = 4;
  EXPECT_EQ(x.grad().to_vector<float>(), expect);
}

TEST(Pool, AvgKnownValuesPadding) {
  Tensor x = ones({1, 1, 3, 3});
  // 3x3 windows, stride 1, padding 1: corners see 4 real values of 9.
  Tensor inc = ops::avg_pool2d(x, {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}});
  EXPECT_NEAR(inc.to_vector<float>()[0], 4.0 / 9.0, 1e-6);
  EXPECT_NEAR(inc.to_vector<float>()[4], 1.0, 1e-6);
  Tensor exc = ops::avg_pool2d(
      x, {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}, .count_include_pad = false});
  EXPECT_EQ(exc.to_vector<float>(), std::vector<float>(9, 1.f));
}

TEST(Pool, CeilModeShapesLikePyTorch) {
  Tensor x = zeros({1, 1, 5, 5});
  EXPECT_EQ(ops::max_pool2d(x, {.kernel = {2, 2}, .stride = {2, 2}}).shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(ops::max_pool2d(x, {.kernel = {2, 2}, .stride = {2, 2}, .ceil_mode = true}).shape(),
            (Shape{1, 1, 3, 3}));
  // The last window would start in the right padding: PyTorch drops it.
  Tensor x6 = zeros({1, 1, 6, 6});
  EXPECT_EQ(ops::max_pool2d(
                x6, {.kernel = {2, 2}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true})
                .shape(),
            (Shape{1, 1, 4, 4}));
  EXPECT_EQ(
      ops::avg_pool2d(zeros({1, 1, 7, 7}),
                      {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true})
          .shape(),
      (Shape{1, 1, 4, 4}));
}

TEST(Pool, AvgCeilModeDivisorLikePyTorch) {
  // torch.nn.functional.avg_pool2d(torch.ones(1, 1, 4, 4), 3, 2, 1, ceil_mode=True) is
  // [[4/9, 6/9, 3/9], [6/9, 1, 1/2], [3/9, 1/2, 1/4]]: the last window (rows 3..5)
  // overhangs h + pad = 5, so its divisor counts 2 rows, not the kernel's 3.
  Tensor y =
      ops::avg_pool2d(ones({1, 1, 4, 4}),
                      {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true});
  ASSERT_EQ(y.shape(), (Shape{1, 1, 3, 3}));
  const std::vector<float> got = y.to_vector<float>();
  EXPECT_NEAR(got[0], 4.0 / 9.0, 1e-6);
  EXPECT_NEAR(got[4], 1.0, 1e-6);
  EXPECT_NEAR(got[8], 0.25, 1e-6);
  EXPECT_NEAR(got[5], 0.5, 1e-6);
  EXPECT_NEAR(got[2], 3.0 / 9.0, 1e-6);
}

TEST(Pool, AdaptiveKnownValues) {
  // 5 -> 3 bins: [0, 2), [1, 4), [3, 5) (PyTorch's floor/ceil edges).
  Tensor x = arange(0, 5, 1, {.dtype = DType::f32}).reshape({1, 1, 1, 5});
  Tensor y = ops::adaptive_avg_pool2d(x, {1, 3});
  const std::vector<float> got = y.to_vector<float>();
  EXPECT_NEAR(got[0], 0.5, 1e-6);
  EXPECT_NEAR(got[1], 2.0, 1e-6);
  EXPECT_NEAR(got[2], 3.5, 1e-6);
  Tensor g = ops::adaptive_avg_pool2d(rand_f64({2, 3, 7, 6}, 1, -1, 1, false), {1, 1});
  expect_close(g, ops::mean(rand_f64({2, 3, 7, 6}, 1, -1, 1, false), {2, 3}, true), 1e-12, 1e-12,
               "global pool");
}

TEST(Pool, RowMajorInputWithBlockedGradient) {
  // A row-major input (here read once as such, as l2_normalize does to a
  // convolution's output) pooled and fed to a convolution whose backward hands
  // the pool a gradient in oneDNN's blocked layout: the pool must convert it.
  // Max pooling routes each dy to one element, so dx equals the f64 result up to
  // the convolution's own rounding; compared against pooling a fresh copy.
  Tensor x = rand_f64({2, 32, 8, 8}, 31, -1, 1, false).to(DType::f32);
  Tensor w = rand_f64({32, 32, 3, 3}, 32, -0.2, 0.2, false).to(DType::f32);
  const ops::Pool2dParams p{.kernel = {2, 2}, .stride = {2, 2}};
  auto run = [&](bool touch) {
    Tensor xi = x.clone();
    xi.set_requires_grad(true);
    Tensor h = ops::relu(ops::conv2d(xi, w, Tensor(), {.padding = {1, 1}}));
    if (touch) (void)h.strided_desc();  // converts h's storage to row-major before the pool
    Tensor y = ops::conv2d(ops::max_pool2d(h, p), w, Tensor(), {.padding = {1, 1}});
    ops::sum(ops::square(y)).backward();
    return xi.grad();
  };
  expect_close(run(true), run(false), 1e-5, 1e-4, "dx");
}

TEST(Pool, Errors) {
  Tensor x = zeros({1, 1, 4, 4});
  EXPECT_THROW(ops::max_pool2d(x, {.kernel = {2, 2}, .stride = {2, 2}, .padding = {2, 2}}), Error);
  EXPECT_THROW(ops::max_pool2d(zeros({1, 4, 4}), {}), Error);
  EXPECT_THROW(ops::max_pool2d(x, {.kernel = {5, 5}, .stride = {1, 1}}), Error);
  EXPECT_THROW(ops::adaptive_avg_pool2d(x, {0, 2}), Error);
}

}  // namespace
}  // namespace tcv
