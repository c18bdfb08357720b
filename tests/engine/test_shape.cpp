// cat, stack, split, chunk and pad beyond the op table's cases
// (tests/ops/cases_shape.cpp): values against hand-written or naive
// references, every dtype for data movement, errors, the gradient of split and
// chunk through their views.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/ops.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::check_gradients;
using testing::error_of;
using testing::expect_close;
using testing::iota;
using testing::rand_f64;

using testing::kAllDTypes;

// ---------------------------------------------------------------- cat

TEST(Cat, Dim0AndDim1Values) {
  Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector<float>({5, 6}, {1, 2});
  Tensor c = ops::cat({a, b}, 0);
  EXPECT_EQ(c.shape(), (Shape{3, 2}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));

  Tensor d = from_vector<float>({7, 8, 9, 10, 11, 12}, {2, 3});
  Tensor e = ops::cat({a, d}, -1);
  EXPECT_EQ(e.shape(), (Shape{2, 5}));
  EXPECT_EQ(e.to_vector<float>(), (std::vector<float>{1, 2, 7, 8, 9, 3, 4, 10, 11, 12}));
}

TEST(Cat, MiddleDimThreeTensorsMixedSizes) {
  Tensor a = iota({2, 1, 3}, DType::f32, 0);
  Tensor b = iota({2, 2, 3}, DType::f32, 100);
  Tensor c = iota({2, 3, 3}, DType::f32, 200);
  Tensor out = ops::cat({a, b, c}, 1);
  ASSERT_EQ(out.shape(), (Shape{2, 6, 3}));
  const auto v = out.to_vector<float>();
  // out[n][k][j]: rows 0 from a, 1-2 from b, 3-5 from c.
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 6; ++k)
      for (int j = 0; j < 3; ++j) {
        float want;
        if (k < 1)
          want = static_cast<float>(n * 3 + j);
        else if (k < 3)
          want = static_cast<float>(100 + n * 6 + (k - 1) * 3 + j);
        else
          want = static_cast<float>(200 + n * 9 + (k - 3) * 3 + j);
        EXPECT_EQ(v[(n * 6 + k) * 3 + j], want) << n << "," << k << "," << j;
      }
}

TEST(Cat, EveryDTypeMovesBitsExactly) {
  for (DType dt : kAllDTypes) {
    Tensor a = iota({2, 3}, dt, 0), b = iota({2, 2}, dt, 1);
    Tensor out = ops::cat({a, b}, 1);
    EXPECT_EQ(out.dtype(), dt) << dtype_name(dt);
    const auto av = a.to_vector<double>(), bv = b.to_vector<double>(), ov = out.to_vector<double>();
    for (int r = 0; r < 2; ++r) {
      for (int j = 0; j < 3; ++j) EXPECT_EQ(ov[r * 5 + j], av[r * 3 + j]) << dtype_name(dt);
      for (int j = 0; j < 2; ++j) EXPECT_EQ(ov[r * 5 + 3 + j], bv[r * 2 + j]) << dtype_name(dt);
    }
  }
}

TEST(Cat, NonContiguousInputsAndPromotion) {
  Tensor a = iota({3, 2}, DType::f32).t();  // (2, 3), strides (1, 2)
  Tensor b = iota({2, 1}, DType::i32, 50);
  Tensor out = ops::cat({a, b}, 1);
  EXPECT_EQ(out.dtype(), DType::f32);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{0, 2, 4, 50, 1, 3, 5, 51}));
}

TEST(Cat, SkipsOneDimEmptyTensors) {
  Tensor empty1 = empty({0});
  Tensor a = iota({2, 2}, DType::f32);
  Tensor out = ops::cat({empty1, a, empty1, a}, 0);
  EXPECT_EQ(out.shape(), (Shape{4, 2}));
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3}));
}

TEST(Cat, ErrorsNameTheMismatchingTensor) {
  Tensor a = zeros({2, 3}), b = zeros({2, 3}), c = zeros({4, 3});
  const std::string msg = error_of([&] { ops::cat({a, b, c}, 1); });
  EXPECT_NE(msg.find("[cat]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tensor 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(4, 3)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(2, 3)"), std::string::npos) << msg;
  EXPECT_THROW(ops::cat({a, zeros({2, 3, 1})}, 0), Error);
  EXPECT_THROW(ops::cat({}, 0), Error);
  EXPECT_THROW(ops::cat({a, b}, 2), Error);
}

TEST(Cat, GradientSkipsInputsWithoutGrad) {
  Tensor a = rand_f64({2, 2}, 7);
  Tensor b = rand_f64({2, 3}, 8, -1, 1, /*requires_grad=*/false);
  Tensor out = ops::cat({a, b}, 1);
  ops::sum(ops::mul(out, out)).backward();
  expect_close(a.grad(), ops::mul(a.detach(), 2.0));
  EXPECT_FALSE(b.grad().defined());
}

// ---------------------------------------------------------------- stack

TEST(Stack, ValuesAndDims) {
  Tensor a = from_vector<float>({1, 2, 3}), b = from_vector<float>({4, 5, 6});
  Tensor s0 = ops::stack({a, b}, 0);
  EXPECT_EQ(s0.shape(), (Shape{2, 3}));
  EXPECT_EQ(s0.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  Tensor s1 = ops::stack({a, b}, -1);
  EXPECT_EQ(s1.shape(), (Shape{3, 2}));
  EXPECT_EQ(s1.to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_THROW(ops::stack({a, from_vector<float>({1, 2})}, 0), Error);
  EXPECT_THROW(ops::stack({a, b}, 2), Error);
}

// ---------------------------------------------------------------- split / chunk

TEST(Split, BySizeLastPieceSmallerAndViews) {
  Tensor x = iota({7, 2}, DType::f32);
  auto parts = ops::split(x, 3, 0);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(parts[2].shape(), (Shape{1, 2}));
  EXPECT_EQ(parts[1].to_vector<float>(), (std::vector<float>{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(parts[2].to_vector<float>(), (std::vector<float>{12, 13}));
  // Views: they share storage with x.
  EXPECT_EQ(parts[1].storage().get(), x.storage().get());
  x.fill_(5.0);
  EXPECT_EQ(parts[2].to_vector<float>(), (std::vector<float>{5, 5}));
}

TEST(Split, BySizesAlongLastDim) {
  Tensor x = iota({2, 6}, DType::i64);
  auto parts = ops::split(x, Shape{1, 0, 2, 3}, -1);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[0].to_vector<int64_t>(), (std::vector<int64_t>{0, 6}));
  EXPECT_EQ(parts[1].shape(), (Shape{2, 0}));
  EXPECT_EQ(parts[2].to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 7, 8}));
  EXPECT_EQ(parts[3].to_vector<int64_t>(), (std::vector<int64_t>{3, 4, 5, 9, 10, 11}));
  const std::string msg = error_of([&] { ops::split(x, Shape{2, 2}, 1); });
  EXPECT_NE(msg.find("[split]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(2, 6)"), std::string::npos) << msg;
  EXPECT_THROW(ops::split(x, 0, 1), Error);
}

TEST(Chunk, SizesFollowTorch) {
  Tensor x = iota({5}, DType::f32);
  auto c = ops::chunk(x, 2);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].to_vector<float>(), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(c[1].to_vector<float>(), (std::vector<float>{3, 4}));
  // 6 into 4 chunks: pieces of 2, so 3 come back (as torch.chunk).
  EXPECT_EQ(ops::chunk(iota({6}, DType::f32), 4).size(), 3u);
  EXPECT_EQ(ops::chunk(iota({2, 3}, DType::f32), 5, 1).size(), 3u);
  EXPECT_THROW(ops::chunk(x, 0), Error);
}

TEST(Split, GradCheckThroughViews) {
  check_gradients("split",
                  [](const std::vector<Tensor>& in) {
                    auto p = ops::split(in[0], Shape{1, 3}, 1);
                    return ops::cat({ops::mul(p[1], p[1]), ops::mul(p[0], 3.0)}, 1);
                  },
                  {rand_f64({2, 4}, 21)});
  check_gradients("chunk",
                  [](const std::vector<Tensor>& in) {
                    auto p = ops::chunk(in[0], 3, 0);
                    return ops::mul(ops::add(p[0], p[2]), p[1]);
                  },
                  {rand_f64({6, 2}, 22)});
}

// ---------------------------------------------------------------- pad

// Naive reference over the flattened data.
std::vector<double> ref_pad(const std::vector<double>& x, const Shape& shape, const Shape& pads,
                            ops::PadMode mode, double value, Shape* out_shape) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  Shape before(nd, 0), os = shape;
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    const int64_t d = nd - 1 - static_cast<int64_t>(i);
    before[d] = pads[2 * i];
    os[d] = shape[d] + pads[2 * i] + pads[2 * i + 1];
  }
  *out_shape = os;
  std::vector<double> out(static_cast<size_t>(shape_numel(os)));
  for (int64_t flat = 0; flat < shape_numel(os); ++flat) {
    int64_t rem = flat, src = 0, mul = 1;
    bool fill = false;
    for (int64_t d = nd - 1; d >= 0; --d) {
      int64_t c = rem % os[d] - before[d];
      rem /= os[d];
      const int64_t n = shape[d];
      if (mode == ops::PadMode::reflect) {
        while (c < 0 || c >= n) c = c < 0 ? -c : 2 * (n - 1) - c;
      } else if (mode == ops::PadMode::replicate) {
        c = std::clamp<int64_t>(c, 0, n - 1);
      } else if (c < 0 || c >= n) {
        fill = true;
      }
      src += c * mul;
      mul *= n;
    }
    out[flat] = fill ? value : x[src];
  }
  return out;
}

struct PadCase {
  Shape shape;
  Shape pads;
};

TEST(Pad, MatchesNaiveReferenceInAllModes) {
  const std::vector<PadCase> cases = {{{5}, {2, 3}},
                                      {{2, 3, 4}, {1, 2}},
                                      {{2, 3, 4}, {3, 0, 1, 2}},
                                      {{2, 3, 4, 5}, {2, 1, 0, 2}},
                                      {{1, 2, 3, 4, 3}, {1, 1, 2, 1, 1, 0}},
                                      {{3, 5}, {-1, 2}},
                                      {{2, 4, 5}, {-2, -1, 1, -1}}};
  const ops::PadMode modes[] = {ops::PadMode::constant, ops::PadMode::reflect,
                                ops::PadMode::replicate};
  for (const auto& c : cases)
    for (auto mode : modes) {
      Tensor x = rand_f64(c.shape, 31, -1, 1, false);
      Tensor out = ops::pad(x, c.pads, mode, 0.75);
      Shape want_shape;
      auto want = ref_pad(x.to_vector<double>(), c.shape, c.pads, mode, 0.75, &want_shape);
      ASSERT_EQ(out.shape(), want_shape) << shape_str(c.pads);
      EXPECT_EQ(out.to_vector<double>(), want)
          << "shape " << shape_str(c.shape) << " pads " << shape_str(c.pads) << " mode "
          << static_cast<int>(mode);
    }
}

TEST(Pad, HandWrittenReflectAndReplicate) {
  Tensor x = from_vector<float>({1, 2, 3});
  EXPECT_EQ(ops::pad(x, {2, 1}, ops::PadMode::reflect).to_vector<float>(),
            (std::vector<float>{3, 2, 1, 2, 3, 2}));
  EXPECT_EQ(ops::pad(x, {2, 1}, ops::PadMode::replicate).to_vector<float>(),
            (std::vector<float>{1, 1, 1, 2, 3, 3}));
  EXPECT_EQ(ops::pad(x, {1, -1}, ops::PadMode::constant, -4).to_vector<float>(),
            (std::vector<float>{-4, 1, 2}));
}

TEST(Pad, ConstantEveryDTypeAndNonContiguous) {
  for (DType dt : kAllDTypes) {
    Tensor x = iota({2, 2}, dt, 1);
    Tensor out = ops::pad(x, {1, 0, 0, 1}, ops::PadMode::constant, 1);
    ASSERT_EQ(out.shape(), (Shape{3, 3})) << dtype_name(dt);
    const auto v = x.to_vector<double>();
    EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{1, v[0], v[1], 1, v[2], v[3], 1, 1, 1}))
        << dtype_name(dt);
  }
  Tensor xt = iota({3, 2}, DType::f32).t();  // (2, 3) = {{0, 2, 4}, {1, 3, 5}}
  EXPECT_EQ(ops::pad(xt, {0, 1}, ops::PadMode::replicate).to_vector<float>(),
            (std::vector<float>{0, 2, 4, 4, 1, 3, 5, 5}));
}

TEST(Pad, EmptyInputs) {
  EXPECT_EQ(ops::pad(zeros({0, 3}), {1, 1}).shape(), (Shape{0, 5}));
  Tensor filled = ops::pad(zeros({2, 0}), {1, 1}, ops::PadMode::constant, 7);
  EXPECT_EQ(filled.shape(), (Shape{2, 2}));
  EXPECT_EQ(filled.to_vector<float>(), (std::vector<float>{7, 7, 7, 7}));
  EXPECT_THROW(ops::pad(zeros({2, 0}), {1, 1}, ops::PadMode::replicate), Error);
}

TEST(Pad, Errors) {
  Tensor x = zeros({2, 3});
  const std::string msg = error_of([&] { ops::pad(x, {3, 0}, ops::PadMode::reflect); });
  EXPECT_NE(msg.find("[pad]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(2, 3)"), std::string::npos) << msg;
  EXPECT_THROW(ops::pad(x, {1, 1, 1}), Error);
  EXPECT_THROW(ops::pad(x, {1, 1, 1, 1, 1, 1}), Error);
  EXPECT_THROW(ops::pad(x, {-2, -2}), Error);
}

TEST(Pad, LargeParallelMatchesReference) {
  // Big enough to fork threads in both the forward and the backward.
  Tensor x = rand_f64({4, 8, 40, 40}, 51, -1, 1, false);
  const Shape pads{3, 2, 1, 3};
  for (auto mode : {ops::PadMode::reflect, ops::PadMode::replicate}) {
    Shape want_shape;
    auto want = ref_pad(x.to_vector<double>(), x.shape(), pads, mode, 0, &want_shape);
    EXPECT_EQ(ops::pad(x, pads, mode).to_vector<double>(), want);
    // Backward: sum of gradients equals sum of upstream gradient (every output reads one input).
    Tensor xg = x.clone().set_requires_grad(true);
    Tensor y = ops::pad(xg, pads, mode);
    ops::sum(y).backward();
    EXPECT_NEAR(ops::sum(xg.grad()).item(), static_cast<double>(y.numel()), 1e-9);
  }
}

}  // namespace
}  // namespace tcv
