// dropout and dropout2d: identity cases, mask statistics and scaling,
// determinism across thread counts, whole channels dropped together, gradients.
#include <gtest/gtest.h>
#include <omp.h>

#include "layers/dropout.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::check_gradients;
using testing::expect_close;
using testing::rand_f64;

TEST(Dropout, EvalAndZeroProbabilityReturnInput) {
  Tensor x = rand_f64({4, 5}, 1);
  EXPECT_TRUE(ops::dropout(x, 0.5, /*training=*/false).same(x));
  EXPECT_TRUE(ops::dropout(x, 0.0, /*training=*/true).same(x));
}

TEST(Dropout, ProbabilityOneGivesZerosAndZeroGradient) {
  Tensor x = rand_f64({3, 4}, 2);
  Tensor y = ops::dropout(x, 1.0, true);
  expect_close(y, zeros({3, 4}, {.dtype = DType::f64}));
  ops::sum(y).backward();
  expect_close(x.grad(), zeros({3, 4}, {.dtype = DType::f64}));
}

TEST(Dropout, DropsAboutPAndScalesTheRest) {
  Generator g(3);
  Tensor x = ones({200000});
  const double p = 0.3;
  Tensor y = ops::dropout(x, p, true, &g);
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
  Tensor a = ops::dropout(x, 0.5, true, &g1);
  omp_set_num_threads(std::max(2, prev));
  Generator g2(42);
  Tensor b = ops::dropout(x, 0.5, true, &g2);
  Tensor c = ops::dropout(x, 0.5, true, &g2);  // the generator moved on: a new mask
  omp_set_num_threads(prev);
  expect_close(a, b, 0, 0);
  EXPECT_GT(ops::sum(ops::abs(ops::sub(b, c))).item(), 1000.0);
}

TEST(Dropout, RejectsBadProbability) {
  EXPECT_THROW(ops::dropout(ones({2}), -0.1, true), Error);
  EXPECT_THROW(ops::dropout(ones({2}), 1.5, true), Error);
}

TEST(Dropout, Gradients) {
  // A fresh generator per call, so every evaluation draws the same mask.
  check_gradients("dropout",
                  [](const std::vector<Tensor>& in) {
                    Generator g(7);
                    return ops::dropout(in[0], 0.4, true, &g);
                  },
                  {rand_f64({6, 7}, 5)});
  Generator g(7);
  Tensor x = rand_f64({6, 7}, 5);
  Tensor y = ops::dropout(x, 0.4, true, &g);
  ops::sum(y).backward();
  // dx is the mask: 0 or 1/(1-p) exactly where y is 0 or x/(1-p).
  const auto xv = x.to_vector<double>(), yv = y.to_vector<double>(),
             gv = x.grad().to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_DOUBLE_EQ(yv[i], xv[i] * gv[i]);
}

// ---- dropout2d ----

TEST(Dropout2d, EvalAndZeroProbabilityReturnInput) {
  Tensor x = rand_f64({2, 3, 4, 5}, 11);
  EXPECT_TRUE(ops::dropout2d(x, 0.5, /*training=*/false).same(x));
  EXPECT_TRUE(ops::dropout2d(x, 0.0, /*training=*/true).same(x));
}

TEST(Dropout2d, DropsWholeChannelsAboutPAndScalesTheRest) {
  Generator g(13);
  const int64_t n = 40, c = 500, h = 3, w = 4;
  const double p = 0.25;
  Tensor y = ops::dropout2d(ones({n, c, h, w}), p, true, &g);
  ASSERT_EQ(y.shape(), (Shape{n, c, h, w}));
  const std::vector<float> v = y.to_vector<float>();
  const auto kept = static_cast<float>(1.0 / (1.0 - p));
  int64_t dropped = 0;
  for (int64_t ch = 0; ch < n * c; ++ch) {
    const float first = v[static_cast<size_t>(ch * h * w)];
    ASSERT_TRUE(first == 0.0f || first == kept) << "channel " << ch << ": " << first;
    for (int64_t i = 1; i < h * w; ++i)
      ASSERT_EQ(v[static_cast<size_t>(ch * h * w + i)], first) << "channel " << ch << " mixes";
    dropped += first == 0.0f;
  }
  // 20000 Bernoulli(0.25) channels: the fraction's standard deviation is ~0.003.
  EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(n * c), p, 0.015);
}

TEST(Dropout2d, MaskIsRandOfTheChannels) {
  // Channel (n, c) is kept where rand((N, C)) from the same generator state is below 1 - p.
  Generator g1(21), g2(21);
  const double p = 0.5;
  Tensor y = ops::dropout2d(ones({3, 7, 2, 2}, {.dtype = DType::f64}), p, true, &g1);
  const std::vector<double> u = rand({3, 7}, {.dtype = DType::f64}, &g2).to_vector<double>();
  EXPECT_EQ(g1.offset(), g2.offset());
  const std::vector<double> v = y.to_vector<double>();
  for (size_t ch = 0; ch < u.size(); ++ch)
    EXPECT_EQ(v[ch * 4], u[ch] < 1.0 - p ? 2.0 : 0.0) << "channel " << ch;
}

TEST(Dropout2d, ProbabilityOneAndFiveDimensionalInput) {
  Tensor x = rand_f64({2, 3, 2, 2, 2}, 12);
  Tensor y = ops::dropout2d(x, 1.0, true);
  expect_close(y, zeros({2, 3, 2, 2, 2}, {.dtype = DType::f64}));
  ops::sum(y).backward();
  expect_close(x.grad(), zeros({2, 3, 2, 2, 2}, {.dtype = DType::f64}));
  Generator g(4);
  EXPECT_EQ(ops::dropout2d(ones({2, 3, 2, 2, 2}), 0.5, true, &g).shape(), (Shape{2, 3, 2, 2, 2}));
}

TEST(Dropout2d, RejectsBadInput) {
  EXPECT_NE(testing::error_of([] {
              ops::dropout2d(ones({4, 5}), 0.5, true);
            }).find("[dropout2d] expects (N, C, d1, ...), got (4, 5)"),
            std::string::npos);
  EXPECT_THROW(ops::dropout2d(ones({2, 2, 2}), 1.5, true), Error);
  EXPECT_THROW(ops::dropout2d(ones({2, 2, 2}, {.dtype = DType::i64}), 0.5, true), Error);
}

TEST(Dropout2d, Gradients) {
  check_gradients("dropout2d",
                  [](const std::vector<Tensor>& in) {
                    Generator g(9);
                    return ops::dropout2d(in[0], 0.4, true, &g);
                  },
                  {rand_f64({3, 4, 2, 3}, 14)});
}

TEST(Dropout2d, LayerFollowsTrainingMode) {
  nn::Dropout2d d(0.5);
  EXPECT_EQ(d.str(), "Dropout2d(p=0.5, inplace=False)");
  Tensor x = rand_f64({2, 8, 3, 3}, 15);
  d.eval();
  EXPECT_TRUE(d.forward(x).same(x));
  d.train();
  EXPECT_FALSE(d.forward(x).same(x));
  EXPECT_THROW(nn::Dropout2d(-0.5), Error);
}

}  // namespace
}  // namespace tcv
