// index_select, gather, scatter_add and masked_fill beyond the op table's
// cases (tests/ops/cases_index.cpp): values, every dtype, both index dtypes,
// out-of-range errors, broadcasting, large parallel scatters.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/ops.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::error_of;
using testing::expect_close;
using testing::iota;
using testing::rand_f64;

using testing::kAllDTypes;

// ---------------------------------------------------------------- index_select

TEST(IndexSelect, ValuesAlongEachDim) {
  Tensor x = iota({3, 4}, DType::f32);
  Tensor rows = ops::index_select(x, 0, from_vector<int64_t>({2, 0, 2}));
  EXPECT_EQ(rows.shape(), (Shape{3, 4}));
  EXPECT_EQ(rows.to_vector<float>(), (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));
  Tensor cols = ops::index_select(x, -1, from_vector<int32_t>({3, 1}));
  EXPECT_EQ(cols.shape(), (Shape{3, 2}));
  EXPECT_EQ(cols.to_vector<float>(), (std::vector<float>{3, 1, 7, 5, 11, 9}));
  Tensor none = ops::index_select(x, 1, from_vector<int64_t>(std::vector<int64_t>{}));
  EXPECT_EQ(none.shape(), (Shape{3, 0}));
}

TEST(IndexSelect, EveryDTypeAndNonContiguous) {
  for (DType dt : kAllDTypes) {
    Tensor x = iota({2, 3, 2}, dt);
    Tensor out = ops::index_select(x, 1, from_vector<int64_t>({1, 1, 0}));
    const auto v = x.to_vector<double>(), o = out.to_vector<double>();
    ASSERT_EQ(out.shape(), (Shape{2, 3, 2}));
    const int pick[] = {1, 1, 0};
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 2; ++j)
          EXPECT_EQ(o[(n * 3 + i) * 2 + j], v[(n * 3 + pick[i]) * 2 + j]) << dtype_name(dt);
  }
  Tensor xt = iota({4, 3}, DType::f64).t();  // (3, 4)
  EXPECT_EQ(ops::index_select(xt, 1, from_vector<int64_t>({3, 0})).to_vector<double>(),
            (std::vector<double>{9, 0, 10, 1, 11, 2}));
}

TEST(IndexSelect, Errors) {
  Tensor x = zeros({3, 4});
  const std::string msg = error_of([&] { ops::index_select(x, 1, from_vector<int64_t>({0, 4})); });
  EXPECT_NE(msg.find("[index_select]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 4"), std::string::npos) << msg;
  EXPECT_THROW(ops::index_select(x, 0, from_vector<int64_t>({-1})), Error);
  EXPECT_THROW(ops::index_select(x, 0, from_vector<float>({0})), Error);
  EXPECT_THROW(ops::index_select(x, 0, zeros({1, 1}, {.dtype = DType::i64})), Error);
}

TEST(IndexSelect, RepeatedIndexAccumulatesItsGradient) {
  Tensor idx = from_vector<int64_t>({2, 0, 2, 3});
  Tensor x = rand_f64({4}, 2);
  ops::sum(ops::index_select(x, 0, idx)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 0, 2, 1}));
}

// ---------------------------------------------------------------- gather

TEST(Gather, ValuesDim1AndDim0) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor g1 = ops::gather(x, 1, from_vector<int64_t>({2, 0, 1, 1}, {2, 2}));
  EXPECT_EQ(g1.to_vector<float>(), (std::vector<float>{3, 1, 5, 5}));
  Tensor g0 = ops::gather(x, 0, from_vector<int32_t>({1, 0, 1}, {1, 3}));
  EXPECT_EQ(g0.to_vector<float>(), (std::vector<float>{4, 2, 6}));
}

TEST(Gather, EveryDTypeSmallerIndexAndBroadcastIndex) {
  for (DType dt : kAllDTypes) {
    Tensor x = iota({3, 4}, dt);
    // index (2, 2): smaller than x in dim 0 (allowed outside dim).
    Tensor out = ops::gather(x, 1, from_vector<int64_t>({3, 0, 2, 2}, {2, 2}));
    const auto v = x.to_vector<double>();
    EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{v[3], v[0], v[6], v[6]}))
        << dtype_name(dt);
  }
  // An expanded (stride 0) index.
  Tensor x = iota({3, 4}, DType::f64);
  Tensor idx = from_vector<int64_t>({1, 3}, {1, 2}).expand({3, 2});
  EXPECT_EQ(ops::gather(x, 1, idx).to_vector<double>(), (std::vector<double>{1, 3, 5, 7, 9, 11}));
}

TEST(Gather, Errors) {
  Tensor x = zeros({2, 3});
  const std::string msg = error_of([&] {
    ops::gather(x, 1, from_vector<int64_t>({0, 7}, {2, 1}));
  });
  EXPECT_NE(msg.find("[gather]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 3"), std::string::npos) << msg;
  EXPECT_THROW(ops::gather(x, 1, zeros({3, 1}, {.dtype = DType::i64})), Error);  // 3 > 2 in dim 0
  EXPECT_THROW(ops::gather(x, 1, zeros({2}, {.dtype = DType::i64})), Error);     // rank
  EXPECT_THROW(ops::gather(x, 2, zeros({2, 1}, {.dtype = DType::i64})), Error);  // dim
}

// ---------------------------------------------------------------- scatter_add

TEST(ScatterAdd, ValuesWithRepeats) {
  Tensor x = from_vector<float>({1, 1, 1, 1, 1, 1}, {2, 3});
  Tensor src = from_vector<float>({10, 20, 30, 40}, {2, 2});
  Tensor idx = from_vector<int64_t>({2, 2, 0, 1}, {2, 2});
  Tensor out = ops::scatter_add(x, 1, idx, src);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{1, 1, 31, 31, 41, 1}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>(6, 1.0f)));  // x untouched
  // dim 0, i32 index, src larger than index.
  Tensor src0 = iota({3, 3}, DType::f32, 1);
  Tensor out0 =
      ops::scatter_add(zeros({2, 3}), 0, from_vector<int32_t>({1, 1, 0, 1, 0, 0}, {2, 3}), src0);
  EXPECT_EQ(out0.to_vector<float>(), (std::vector<float>{0, 5, 9, 5, 2, 0}));
}

TEST(ScatterAdd, ArithmeticDTypes) {
  for (DType dt :
       {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8}) {
    Tensor x = iota({4}, dt);
    Tensor out = ops::scatter_add(x, 0, from_vector<int64_t>({3, 3, 0}), iota({3}, dt, 1));
    EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{3, 1, 2, 6})) << dtype_name(dt);
  }
}

TEST(ScatterAdd, LargeParallelMatchesSerialSum) {
  // Many lines, many repeats: every line's total is preserved.
  Generator g(5);
  Tensor src = uniform({64, 512}, 0, 1, {.dtype = DType::f64}, &g);
  Tensor idx = randint(0, 16, {64, 512}, {.dtype = DType::i64}, &g);
  Tensor out = ops::scatter_add(zeros({64, 16}, {.dtype = DType::f64}), 1, idx, src);
  expect_close(ops::sum(out, {1}), ops::sum(src, {1}), 1e-9, 1e-12);
  const auto iv = idx.to_vector<int64_t>();
  const auto sv = src.to_vector<double>();
  std::vector<double> want(64 * 16, 0.0);
  for (int r = 0; r < 64; ++r)
    for (int j = 0; j < 512; ++j) want[r * 16 + iv[r * 512 + j]] += sv[r * 512 + j];
  expect_close(out, from_vector<double>(want, {64, 16}), 1e-9, 1e-12);
}

TEST(ScatterAdd, ManyLinesInParallelAndDim0) {
  // 2048 lines of 32: forks threads; each line's total must be preserved.
  Generator g(6);
  Tensor src = uniform({2048, 32}, 0, 1, {.dtype = DType::f64}, &g);
  Tensor idx = randint(0, 8, {2048, 32}, {.dtype = DType::i64}, &g);
  Tensor out = ops::scatter_add(zeros({2048, 8}, {.dtype = DType::f64}), 1, idx, src);
  expect_close(ops::sum(out, {1}), ops::sum(src, {1}), 1e-9, 1e-12);
  // Along dim 0 with a transposed (non-contiguous) src: column totals preserved.
  Tensor src_t = uniform({64, 300}, 0, 1, {.dtype = DType::f64}, &g).t();  // (300, 64)
  Tensor idx0 = randint(0, 5, {300, 64}, {.dtype = DType::i32}, &g);
  Tensor out0 = ops::scatter_add(zeros({5, 64}, {.dtype = DType::f64}), 0, idx0, src_t);
  expect_close(ops::sum(out0, {0}), ops::sum(src_t, {0}), 1e-9, 1e-12);
  const auto iv = idx0.to_vector<int32_t>();
  const auto sv = src_t.to_vector<double>();
  std::vector<double> want(5 * 64, 0.0);
  for (int i = 0; i < 300; ++i)
    for (int j = 0; j < 64; ++j) want[iv[i * 64 + j] * 64 + j] += sv[i * 64 + j];
  expect_close(out0, from_vector<double>(want, {5, 64}), 1e-9, 1e-12);
}

TEST(ScatterAdd, Errors) {
  Tensor x = zeros({2, 3});
  const std::string msg = error_of([&] {
    ops::scatter_add(x, 1, from_vector<int64_t>({5}, {1, 1}), zeros({1, 1}));
  });
  EXPECT_NE(msg.find("[scatter_add]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 3"), std::string::npos) << msg;
  EXPECT_THROW(ops::scatter_add(x, 1, zeros({1, 2}, {.dtype = DType::i64}), zeros({1, 1})), Error);
  EXPECT_THROW(ops::scatter_add(x, 1, zeros({1, 1}, {.dtype = DType::i64}),
                                zeros({1, 1}, {.dtype = DType::f64})),
               Error);
}

// ---------------------------------------------------------------- masked_fill

TEST(MaskedFill, BroadcastMaskAndDTypes) {
  Tensor mask = from_vector<float>({1, 0, 1}, {1, 3});
  mask = ops::gt(mask, 0.5);
  for (DType dt : kAllDTypes) {
    Tensor x = iota({2, 3}, dt);
    Tensor out = ops::masked_fill(x, mask, 1);
    const auto v = x.to_vector<double>();
    EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{1, v[1], 1, 1, v[4], 1}))
        << dtype_name(dt);
  }
  Tensor x = iota({2, 3}, DType::f32);
  EXPECT_THROW(ops::masked_fill(x, zeros({2, 3}), 0), Error);  // not bool
  EXPECT_THROW(ops::masked_fill(x, zeros({3, 3}, {.dtype = DType::b8}), 0), Error);
  EXPECT_THROW(ops::masked_fill(zeros({3}), zeros({2, 3}, {.dtype = DType::b8}), 0), Error);
}

TEST(MaskedFill, FilledPositionsGetNoGradient) {
  Tensor mask = ops::gt(from_vector<double>({0.2, 0.7, 0.9, 0.1}, {4, 1}), 0.5);
  Tensor x = rand_f64({4, 3}, 11);
  ops::sum(ops::masked_fill(x, mask, 2.0)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(),
            (std::vector<double>{1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1}));
}

}  // namespace
}  // namespace tcv
