// upsample beyond the op table's cases (tests/ops/cases_upsample.cpp): PyTorch
// 1.13 values for nearest and bilinear (align_corners true/false), identity
// and independence of channels, errors.
#include <gtest/gtest.h>

#include "support/gradcheck.h"

namespace tcv {
namespace {

using ops::InterpMode;
using testing::expect_close;
using testing::lit;
using testing::rand_f64;

// torch.arange(6).reshape(1, 1, 2, 3) * 1.5 - 2
Tensor input(DType dt) {
  return lit({-2.0, -0.5, 1.0, 2.5, 4.0, 5.5}, {1, 1, 2, 3}, dt);
}

TEST(Upsample, NearestMatchesPyTorch) {
  for (DType dt : {DType::f32, DType::f64}) {
    expect_close(ops::upsample(input(dt), {5, 4}, InterpMode::nearest),
                 lit({-2.0, -2.0, -0.5, 1.0, -2.0, -2.0, -0.5, 1.0, -2.0, -2.0,
                      -0.5, 1.0,  2.5,  2.5, 4.0,  5.5,  2.5,  2.5, 4.0,  5.5},
                     {1, 1, 5, 4}));
    expect_close(ops::upsample(input(dt), {3, 7}, InterpMode::nearest),
                 lit({-2.0, -2.0, -2.0, -0.5, -0.5, 1.0, 1.0, -2.0, -2.0, -2.0, -0.5,
                      -0.5, 1.0,  1.0,  2.5,  2.5,  2.5, 4.0, 4.0,  5.5,  5.5},
                     {1, 1, 3, 7}));
  }
}

TEST(Upsample, BilinearMatchesPyTorch) {
  const Tensor x = input(DType::f32);
  expect_close(
      ops::upsample(x, {3, 5}, InterpMode::bilinear, false),
      lit({-2.0, -1.4, -0.5, 0.4, 1.0, 0.25, 0.85, 1.75, 2.65, 3.25, 2.5, 3.1, 4.0, 4.9, 5.5},
          {1, 1, 3, 5}),
      1e-5, 1e-5, "3x5 align_corners=false");
  expect_close(
      ops::upsample(x, {3, 5}, InterpMode::bilinear, true),
      lit({-2.0, -1.25, -0.5, 0.25, 1.0, 0.25, 1.0, 1.75, 2.5, 3.25, 2.5, 3.25, 4.0, 4.75, 5.5},
          {1, 1, 3, 5}),
      1e-5, 1e-5, "3x5 align_corners=true");
  expect_close(ops::upsample(x, {1, 2}, InterpMode::bilinear, false),
               lit({0.625, 2.875}, {1, 1, 1, 2}), 1e-6, 1e-6, "downsample");
  expect_close(
      ops::upsample(x, {4, 6}, InterpMode::bilinear, false),
      lit({-2.0,  -1.625, -0.875, -0.125, 0.625, 1.0,   -0.875, -0.5,  0.25,  1.0,   1.75,  2.125,
           1.375, 1.75,   2.5,    3.25,   4.0,   4.375, 2.5,    2.875, 3.625, 4.375, 5.125, 5.5},
          {1, 1, 4, 6}),
      1e-5, 1e-5, "2x");
}

TEST(Upsample, SameSizeIsIdentityAndChannelsAreIndependent) {
  Tensor x = rand_f64({2, 3, 4, 5}, 1, -1, 1, false);
  expect_close(ops::upsample(x, {4, 5}, InterpMode::bilinear, false), x, 0, 0);
  expect_close(ops::upsample(x, {4, 5}, InterpMode::nearest), x, 0, 0);
  Tensor y = ops::upsample(x, {7, 9}, InterpMode::bilinear, true);
  Tensor y1 = ops::upsample(x.narrow(1, 2, 1).narrow(0, 1, 1), {7, 9}, InterpMode::bilinear, true);
  expect_close(y.narrow(1, 2, 1).narrow(0, 1, 1), y1, 0, 0);
}

TEST(Upsample, Errors) {
  EXPECT_THROW(ops::upsample(zeros({3, 4, 5}), {2, 2}, InterpMode::nearest), Error);
  EXPECT_THROW(ops::upsample(zeros({1, 1, 2, 2}), {0, 2}, InterpMode::bilinear), Error);
  EXPECT_THROW(ops::upsample(zeros({1, 1, 2, 2}), {4, 4}, InterpMode::nearest, true), Error);
}

}  // namespace
}  // namespace tcv
