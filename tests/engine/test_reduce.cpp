// Reductions beyond the op table's cases (tests/ops/cases_reduce.cpp): values
// of sum/mean/var over dims with keepdim, max/min/argmax with indices, NaN and
// empty-dim behaviour, threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/ops.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::expect_close;
using testing::rand_f64;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// (2, 3, 4) holding 0..23.
Tensor iota234(DType dt = DType::f64) {
  return arange(0.0, 24.0, 1.0, {.dtype = DType::f64}).reshape({2, 3, 4}).to(dt);
}

TEST(Sum, OverDimsWithKeepdim) {
  Tensor x = iota234();
  Tensor s1 = ops::sum(x, {1});
  EXPECT_EQ(s1.shape(), (Shape{2, 4}));
  EXPECT_EQ(s1.to_vector<double>(), (std::vector<double>{12, 15, 18, 21, 48, 51, 54, 57}));
  Tensor s1k = ops::sum(x, {-2}, /*keepdim=*/true);
  EXPECT_EQ(s1k.shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(s1k.to_vector<double>(), s1.to_vector<double>());
  // Non-adjacent dims take the permute path.
  Tensor s02 = ops::sum(x, {0, 2});
  EXPECT_EQ(s02.shape(), (Shape{3}));
  EXPECT_EQ(s02.to_vector<double>(), (std::vector<double>{60, 92, 124}));
  EXPECT_EQ(ops::sum(x, {0, 2}, true).shape(), (Shape{1, 3, 1}));
  Tensor all = ops::sum(x);
  EXPECT_EQ(all.dim(), 0);
  EXPECT_EQ(all.item(), 276.0);
  EXPECT_EQ(ops::sum(x, {}, true).shape(), (Shape{1, 1, 1}));
  EXPECT_THROW(ops::sum(x, {1, -2}), Error);  // repeated
  EXPECT_THROW(ops::sum(x, {3}), Error);
}

TEST(Sum, NonContiguousInput) {
  Tensor x = iota234().permute({2, 0, 1});  // (4, 2, 3)
  EXPECT_EQ(ops::sum(x, {0}).to_vector<double>(), (std::vector<double>{6, 22, 38, 54, 70, 86}));
  EXPECT_EQ(ops::sum(x, {2}).to_vector<double>(),
            (std::vector<double>{12, 48, 15, 51, 18, 54, 21, 57}));
}

TEST(Sum, IntegerAndBoolGiveI64) {
  Tensor xi = iota234(DType::i32);
  Tensor s = ops::sum(xi, {2});
  EXPECT_EQ(s.dtype(), DType::i64);
  EXPECT_EQ(s.to_vector<int64_t>(), (std::vector<int64_t>{6, 22, 38, 54, 70, 86}));
  Tensor b = ops::gt(iota234(), 20.5);
  Tensor c = ops::sum(b);
  EXPECT_EQ(c.dtype(), DType::i64);
  EXPECT_EQ(c.item(), 3.0);
}

TEST(Sum, HalfAccumulatesInDouble) {
  // 4096 ones: an f16 accumulator would stop at 2048.
  Tensor x = ones({4096}, {.dtype = DType::f16});
  EXPECT_EQ(ops::sum(x).item(), 4096.0);
  Tensor y = ones({2, 4096, 3}, {.dtype = DType::bf16});
  EXPECT_EQ(ops::sum(y, {1}).to_vector<double>(), std::vector<double>(6, 4096.0));
}

TEST(Sum, LongRowsSplitAcrossThreadsSameResultAnyThreadCount) {
  // A full reduction of 300007 values and rows of 200003: pieces summed in
  // parallel and added in order. Against a double loop, and bit-identical on
  // one thread and on two.
  Tensor x = ops::add(rand({2, 200003}), -0.25);
  const auto xv = x.to_vector<float>();
  double all = 0, row1 = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    all += xv[i];
    if (i >= 200003) row1 += xv[i];
  }
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Tensor a1 = ops::sum(x), r1 = ops::sum(x, {1});
  Tensor y = ops::add(rand({300007}), 1.0);
  const Tensor y1 = ops::sum(y);
  omp_set_num_threads(2);
  const Tensor a2 = ops::sum(x), r2 = ops::sum(x, {1}), y2 = ops::sum(y);
  omp_set_num_threads(saved);
  EXPECT_NEAR(a2.item(), all, 1e-6 * std::fabs(all) + 1e-3);
  EXPECT_NEAR(r2.to_vector<float>()[1], row1, 1e-6 * std::fabs(row1) + 1e-3);
  EXPECT_EQ(a1.item(), a2.item());
  EXPECT_EQ(r1.to_vector<float>(), r2.to_vector<float>());
  EXPECT_EQ(y1.item(), y2.item());
  double ys = 0;
  for (float v : y.to_vector<float>()) ys += v;
  EXPECT_NEAR(y2.item(), ys, 1e-6 * ys);
}

TEST(Sum, EmptyDimGivesZero) {
  EXPECT_EQ(ops::sum(zeros({2, 0}), {1}).to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_EQ(ops::sum(zeros({0, 3}), {0}).to_vector<float>(), (std::vector<float>{0, 0, 0}));
}

TEST(Mean, ValuesAndIntegerError) {
  Tensor x = iota234();
  EXPECT_EQ(ops::mean(x, {2}).to_vector<double>(),
            (std::vector<double>{1.5, 5.5, 9.5, 13.5, 17.5, 21.5}));
  EXPECT_EQ(ops::mean(x, {0, 1}, true).shape(), (Shape{1, 1, 4}));
  EXPECT_EQ(ops::mean(x, {0, 1}).to_vector<double>(), (std::vector<double>{10, 11, 12, 13}));
  EXPECT_DOUBLE_EQ(ops::mean(x).item(), 11.5);
  EXPECT_THROW(ops::mean(iota234(DType::i64)), Error);
}

// PyTorch: torch.zeros(0).mean() is nan (0/0). reduce.cpp divides by max(count, 1)
// and returns 0.
TEST(Mean, OfEmptyIsNaN) {
  EXPECT_TRUE(std::isnan(ops::mean(zeros({0}, {.dtype = DType::f64})).item()))
      << "mean over zero elements should be NaN as in PyTorch";
}

TEST(Var, CorrectionAndKeepdim) {
  Tensor x = from_vector<double>({1, 2, 3, 4, 2, 4, 6, 8}, {2, 4});
  // Row 0: mean 2.5, squared deviations 5; row 1: mean 5, 20.
  expect_close(ops::var(x, {1}), from_vector<double>({5.0 / 3, 20.0 / 3}), 1e-12, 1e-12);
  EXPECT_EQ(ops::var(x, {1}, 0).to_vector<double>(), (std::vector<double>{1.25, 5.0}));
  EXPECT_EQ(ops::var(x, {0}, 1, true).shape(), (Shape{1, 4}));
  EXPECT_EQ(ops::var(x, {0}, 1).to_vector<double>(), (std::vector<double>{0.5, 2, 4.5, 8}));
  // All elements: mean 3.75, sum of squared deviations 37.5.
  EXPECT_NEAR(ops::var(x).item(), 37.5 / 7, 1e-12);
  // One element with correction 1: 0/0.
  EXPECT_TRUE(std::isnan(ops::var(ones({1}, {.dtype = DType::f64})).item()));
}

TEST(MaxMin, ValuesIndicesAlongEachDim) {
  Tensor x = from_vector<float>({3, 7, 7, 1, 9, 0, 4, 9, 2}, {3, 3});
  auto [v1, i1] = ops::max(x, 1);
  EXPECT_EQ(v1.to_vector<float>(), (std::vector<float>{7, 9, 9}));
  EXPECT_EQ(i1.dtype(), DType::i64);
  EXPECT_EQ(i1.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1}));  // first on ties
  auto [v0, i0] = ops::max(x, 0, /*keepdim=*/true);
  EXPECT_EQ(v0.shape(), (Shape{1, 3}));
  EXPECT_EQ(v0.to_vector<float>(), (std::vector<float>{4, 9, 7}));
  EXPECT_EQ(i0.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 0}));
  auto [m1, j1] = ops::min(x, -1);
  EXPECT_EQ(m1.to_vector<float>(), (std::vector<float>{3, 0, 2}));
  EXPECT_EQ(j1.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 2}));
  EXPECT_EQ(ops::argmax(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(ops::argmin(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(ops::argmax(x, 1, true).shape(), (Shape{3, 1}));
  EXPECT_EQ(ops::max(x).item(), 9.0);
  EXPECT_EQ(ops::min(x).item(), 0.0);
  EXPECT_EQ(ops::max(x).dim(), 0);
}

TEST(MaxMin, MiddleDimAndIntegers) {
  Tensor x = iota234(DType::i32);
  auto [v, i] = ops::max(x, 1);
  EXPECT_EQ(v.dtype(), DType::i32);
  EXPECT_EQ(v.to_vector<int32_t>(), (std::vector<int32_t>{8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_EQ(i.to_vector<int64_t>(), std::vector<int64_t>(8, 2));
  auto [m, j] = ops::min(ops::neg(iota234()), 2);
  EXPECT_EQ(m.to_vector<double>(), (std::vector<double>{-3, -7, -11, -15, -19, -23}));
  EXPECT_EQ(j.to_vector<int64_t>(), std::vector<int64_t>(6, 3));
}

TEST(MaxMin, NaNWinsWithItsIndex) {
  Tensor x = from_vector<double>({1, kNaN, 5, kNaN, 0, 2}, {2, 3});
  auto [v, i] = ops::max(x, 1);
  const auto vv = v.to_vector<double>();
  EXPECT_TRUE(std::isnan(vv[0]));
  EXPECT_TRUE(std::isnan(vv[1]));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  auto [m, j] = ops::min(x, 1);
  EXPECT_TRUE(std::isnan(m.to_vector<double>()[0]));
  EXPECT_EQ(j.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_TRUE(std::isnan(ops::max(x).item()));
  EXPECT_TRUE(std::isnan(ops::sum(x, {1}).to_vector<double>()[0]));
  EXPECT_EQ(ops::max(from_vector<double>({kNaN, 4, 9}), 0).second.item(), 0.0);
}

TEST(MaxMin, EmptyDimIsAnError) {
  EXPECT_THROW(ops::max(zeros({2, 0}), 1), Error);
  EXPECT_THROW(ops::max(zeros({2, 3}), 2), Error);
}

TEST(ReduceGrad, MaxRoutesToTheArgmaxOnly) {
  Tensor x = from_vector<double>({0.1, 0.9, 0.3, 0.7}, {2, 2});
  x.set_requires_grad(true);
  ops::sum(ops::max(x, 1).first).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 1, 0, 1}));
}

}  // namespace
}  // namespace tcv
