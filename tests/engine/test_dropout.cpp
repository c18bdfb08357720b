// dropout: identity cases, mask statistics and scaling, determinism across
// thread counts, gradients.
#include <gtest/gtest.h>
#include <omp.h>

#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::check_gradients;
using testing::expect_close;
using testing::rand_f64;

TEST(Dropout, EvalAndZeroProbabilityReturnInput) {
  Tensor x = rand_f64({4, 5}, 1);
  EXPECT_TRUE(ops::dropout(x, {.p = 0.5, .training = false}).same(x));
  EXPECT_TRUE(ops::dropout(x, {.p = 0.0}).same(x));
}

TEST(Dropout, ProbabilityOneGivesZerosAndZeroGradient) {
  Tensor x = rand_f64({3, 4}, 2);
  Tensor y = ops::dropout(x, {.p = 1.0});
  expect_close(y, zeros({3, 4}, {.dtype = DType::f64}));
  ops::sum(y).backward();
  expect_close(x.grad(), zeros({3, 4}, {.dtype = DType::f64}));
}

TEST(Dropout, DropsAboutPAndScalesTheRest) {
  Generator g(3);
  Tensor x = ones({200000});
  const double p = 0.3;
  Tensor y = ops::dropout(x, {.p = p, .generator = &g});
  const std::vector<float> v = y.to_vector<float>();
  int64_t zeros_n = 0;
  for (float e : v) {
    if (e == 0.0f) {
      ++zeros_n;
    } else {
      ASSERT_FLOAT_EQ(e, static_cast<float>(1.0 / (1.0 - p)));
    }
  }
  // 200000 Bernoulli(0.3) draws: the standard deviation of the fraction is ~0.001.
  EXPECT_NEAR(static_cast<double>(zeros_n) / v.size(), p, 0.005);
  EXPECT_NEAR(ops::mean(y).item(), 1.0, 0.01);  // unbiased in expectation
}

TEST(Dropout, SameSeedSameMaskWhateverTheThreadCount) {
  Tensor x = ones({100000}, {.dtype = DType::f64});
  const int prev = omp_get_max_threads();
  omp_set_num_threads(1);
  Generator g1(42);
  Tensor a = ops::dropout(x, {.p = 0.5, .generator = &g1});
  omp_set_num_threads(std::max(2, prev));
  Generator g2(42);
  Tensor b = ops::dropout(x, {.p = 0.5, .generator = &g2});
  Tensor c = ops::dropout(x, {.p = 0.5, .generator = &g2});  // the generator moved on: a new mask
  omp_set_num_threads(prev);
  expect_close(a, b, 0, 0);
  EXPECT_GT(ops::sum(ops::abs(ops::sub(b, c))).item(), 1000.0);
}

// f16/bf16 on the CPU: the same mask as f32 for the same generator state, the
// scale rounded to the dtype and each product rounded once (as mul in that dtype).
TEST(Dropout, SixteenBitFloatsDrawTheF32Mask) {
  for (const DType dt : {DType::f16, DType::bf16}) {
    Generator gx(5);
    const Tensor x = (rand({5000}, {}, &gx) + 0.5).to(dt);  // no zeros
    Generator g1(9), g2(9);
    const std::vector<float> ref =
        ops::dropout(x.to(DType::f32), {.p = 0.3, .generator = &g1}).to_vector<float>();
    const Tensor y = ops::dropout(x, {.p = 0.3, .generator = &g2});
    ASSERT_EQ(y.dtype(), dt);
    const float scale = full({}, 1.0 / 0.7, {.dtype = dt}).item<float>();
    const std::vector<float> xs = x.to_vector<float>(), ys = y.to_vector<float>();
    for (size_t i = 0; i < xs.size(); ++i) {
      const float want =
          ref[i] == 0.0f ? 0.0f : full({}, xs[i] * scale, {.dtype = dt}).item<float>();
      ASSERT_EQ(ys[i], want) << dtype_name(dt) << " element " << i;
    }
  }
}

TEST(Dropout, RejectsBadProbability) {
  EXPECT_THROW(ops::dropout(ones({2}), {.p = -0.1}), Error);
  EXPECT_THROW(ops::dropout(ones({2}), {.p = 1.5}), Error);
}

TEST(Dropout, Gradients) {
  // A fresh generator per call, so every evaluation draws the same mask.
  check_gradients("dropout",
                  [](const std::vector<Tensor>& in) {
                    Generator g(7);
                    return ops::dropout(in[0], {.p = 0.4, .generator = &g});
                  },
                  {rand_f64({6, 7}, 5)});
  Generator g(7);
  Tensor x = rand_f64({6, 7}, 5);
  Tensor y = ops::dropout(x, {.p = 0.4, .generator = &g});
  ops::sum(y).backward();
  // dx is the mask: 0 or 1/(1-p) exactly where y is 0 or x/(1-p).
  const auto xv = x.to_vector<double>(), yv = y.to_vector<double>(),
             gv = x.grad().to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_DOUBLE_EQ(yv[i], xv[i] * gv[i]);
}

}  // namespace
}  // namespace tcv
