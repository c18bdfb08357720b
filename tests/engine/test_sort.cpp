// sort and topk beyond the op table's cases (tests/ops/cases_sort.cpp): values
// and indices, stability, NaN placement, every dtype, non-last dims, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/ops.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(Sort, AscendingDescendingStable) {
  Tensor x = from_vector<float>({3, 1, 2, 1, 3, 0});
  auto [v, i] = ops::sort(x);
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{0, 1, 1, 2, 3, 3}));
  EXPECT_EQ(i.dtype(), DType::i64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{5, 1, 3, 2, 0, 4}));
  auto [vd, id] = ops::sort(x, 0, /*descending=*/true);
  EXPECT_EQ(vd.to_vector<float>(), (std::vector<float>{3, 3, 2, 1, 1, 0}));
  EXPECT_EQ(id.to_vector<int64_t>(), (std::vector<int64_t>{0, 4, 2, 1, 3, 5}));  // ties in order
}

TEST(Sort, StableOnManyTies) {
  // 1000 values from {0, 1, 2}: equal keys must keep increasing indices.
  Generator g(3);
  Tensor x = randint(0, 3, {1000}, {.dtype = DType::i32}, &g);
  for (bool desc : {false, true}) {
    auto [v, i] = ops::sort(x, 0, desc);
    const auto vv = v.to_vector<int32_t>();
    const auto iv = i.to_vector<int64_t>();
    const auto xv = x.to_vector<int32_t>();
    for (size_t k = 1; k < vv.size(); ++k) {
      ASSERT_TRUE(desc ? vv[k - 1] >= vv[k] : vv[k - 1] <= vv[k]);
      if (vv[k - 1] == vv[k]) {
        ASSERT_LT(iv[k - 1], iv[k]) << "unstable at " << k;
      }
    }
    for (size_t k = 0; k < vv.size(); ++k) ASSERT_EQ(xv[iv[k]], vv[k]);
  }
}

TEST(Sort, AlongDim0OfNonContiguous) {
  Tensor x = from_vector<double>({5, 1, 4, 2, 6, 0}, {2, 3}).t();  // (3, 2): {{5,2},{1,6},{4,0}}
  auto [v, i] = ops::sort(x, 0);
  EXPECT_EQ(v.shape(), (Shape{3, 2}));
  EXPECT_EQ(v.to_vector<double>(), (std::vector<double>{1, 0, 4, 2, 5, 6}));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 2, 0, 0, 1}));
}

TEST(Sort, NaNSortsAsLargest) {
  Tensor x = from_vector<double>({2, kNaN, -1, 5});
  auto [v, i] = ops::sort(x);
  const auto vv = v.to_vector<double>();
  EXPECT_EQ(vv[0], -1);
  EXPECT_EQ(vv[1], 2);
  EXPECT_EQ(vv[2], 5);
  EXPECT_TRUE(std::isnan(vv[3]));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 3, 1}));
  auto [vd, id] = ops::sort(x, 0, true);
  EXPECT_TRUE(std::isnan(vd.to_vector<double>()[0]));
  EXPECT_EQ(id.to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 0, 2}));
  auto [tv, ti] = ops::topk(x, 2);
  EXPECT_TRUE(std::isnan(tv.to_vector<double>()[0]));
  EXPECT_EQ(ti.to_vector<int64_t>(), (std::vector<int64_t>{1, 3}));
}

TEST(Sort, EveryDType) {
  const std::vector<double> vals = {3, 0, 2, 1, 2};
  for (DType dt :
       {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8}) {
    Tensor x = from_vector<double>(vals).to(dt);
    auto [v, i] = ops::sort(x, -1, true);
    EXPECT_EQ(v.dtype(), dt);
    EXPECT_EQ(v.to_vector<double>(), (std::vector<double>{3, 2, 2, 1, 0})) << dtype_name(dt);
    EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 4, 3, 1})) << dtype_name(dt);
  }
  Tensor b = from_vector<double>({1, 0, 1, 0}).to(DType::b8);
  auto [bv, bi] = ops::sort(b);
  EXPECT_EQ(bv.to_vector<double>(), (std::vector<double>{0, 0, 1, 1}));
  EXPECT_EQ(bi.to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 0, 2}));
}

// ---------------------------------------------------------------- topk

TEST(TopK, LargestAndSmallest) {
  Tensor x = from_vector<float>({1, 9, 3, 7, 5, 3, 8, 2}, {2, 4});
  auto [v, i] = ops::topk(x, 2);
  EXPECT_EQ(v.shape(), (Shape{2, 2}));
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{9, 7, 8, 5}));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 2, 0}));
  auto [vs, is] = ops::topk(x, 3, 1, /*largest=*/false);
  EXPECT_EQ(vs.to_vector<float>(), (std::vector<float>{1, 3, 7, 2, 3, 5}));
  EXPECT_EQ(is.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 3, 3, 1, 0}));
  auto [v0, i0] = ops::topk(x, 1, 0);
  EXPECT_EQ(v0.to_vector<float>(), (std::vector<float>{5, 9, 8, 7}));
  EXPECT_EQ(i0.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1, 0}));
}

TEST(TopK, TiesGoToLowerIndexAndKEdges) {
  Tensor x = from_vector<int64_t>({4, 7, 7, 1, 7});
  auto [v, i] = ops::topk(x, 2);
  EXPECT_EQ(v.to_vector<int64_t>(), (std::vector<int64_t>{7, 7}));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(ops::topk(x, 0).first.shape(), (Shape{0}));
  auto [va, ia] = ops::topk(x, 5, 0, false);
  EXPECT_EQ(ia.to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 1, 2, 4}));
}

TEST(TopK, MatchesSortOnLargeInput) {
  Generator g(9);
  Tensor x = uniform({64, 300, 3}, -1, 1, {.dtype = DType::f32}, &g);
  auto [v, i] = ops::topk(x, 10, 1);
  auto [sv, si] = ops::sort(x, 1, true);
  EXPECT_EQ(v.to_vector<float>(), sv.narrow(1, 0, 10).to_vector<float>());
  EXPECT_EQ(i.to_vector<int64_t>(), si.narrow(1, 0, 10).to_vector<int64_t>());
  // Indices point at the values.
  EXPECT_EQ(ops::gather(x, 1, i).to_vector<float>(), v.to_vector<float>());
}

TEST(TopK, Errors) {
  Tensor x = zeros({2, 3});
  try {
    ops::topk(x, 4);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[topk]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("k 4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(2, 3)"), std::string::npos) << msg;
  }
  EXPECT_THROW(ops::topk(x, -1), Error);
  EXPECT_THROW(ops::topk(x, 1, 2), Error);
  EXPECT_THROW(ops::sort(x, -3), Error);
}

TEST(TopK, GradientLandsOnTheChosenPositions) {
  Tensor x = from_vector<double>({0.5, 0.1, 0.9, 0.3});
  x.set_requires_grad(true);
  ops::sum(ops::topk(x, 2).first).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 0, 1, 0}));
}

}  // namespace
}  // namespace tcv
