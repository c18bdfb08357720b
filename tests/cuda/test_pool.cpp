// Pooling on CUDA against the CPU: max pooling (argmax indices for the
// backward, padding, ceil mode, overlapping and non-square windows), average
// pooling with count_include_pad on and off and ceil-mode overhang, adaptive
// average pooling (dividing and non-dividing bins, up- and downsampling,
// global); f32 and f64 with gradients, odd sizes, non-contiguous input, empty batch.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "engine/rng.h"
#include "support/cuda_compare.h"

namespace tcv {
namespace {

using testing::CudaCompareOptions;
using testing::expect_cuda_matches_cpu;
using TVec = std::vector<Tensor>;

Tensor input(const Shape& shape, uint64_t seed, DType dt) {
  return testing::random_input(shape, seed, dt);
}

CudaCompareOptions tol_for(DType dt) {
  CudaCompareOptions o;
  if (dt == DType::f64) o.rtol = o.atol = 1e-12;
  return o;
}

std::vector<ops::Pool2dParams> params() {
  return {
      {},  // 2x2 stride 2
      {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}},
      {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true},
      {.kernel = {3, 2}, .stride = {1, 2}, .padding = {1, 0}},
      {.kernel = {2, 2}, .stride = {2, 2}, .ceil_mode = true},
      {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .count_include_pad = false},
      {.kernel = {3, 3},
       .stride = {2, 2},
       .padding = {1, 1},
       .ceil_mode = true,
       .count_include_pad = false},
      {.kernel = {5, 5}, .stride = {3, 3}, .padding = {2, 2}, .ceil_mode = true},
  };
}

TEST(CudaPool, MaxPool) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64})
    for (const auto& p : params())
      expect_cuda_matches_cpu(
          std::string("max_pool2d ") + dtype_name(dt),
          [p](const TVec& v) { return ops::max_pool2d(v[0], p); }, {input({3, 4, 13, 11}, 1, dt)},
          tol_for(dt));
}

TEST(CudaPool, AvgPool) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64})
    for (const auto& p : params())
      expect_cuda_matches_cpu(
          std::string("avg_pool2d ") + dtype_name(dt),
          [p](const TVec& v) { return ops::avg_pool2d(v[0], p); }, {input({2, 3, 13, 10}, 2, dt)},
          tol_for(dt));
}

TEST(CudaPool, NonContiguousAndEmpty) {
  TCV_REQUIRE_CUDA();
  const ops::Pool2dParams p{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
  expect_cuda_matches_cpu("max_pool2d transposed",
                          [p](const TVec& v) { return ops::max_pool2d(v[0].transpose(2, 3), p); },
                          {input({2, 3, 9, 12}, 3, DType::f32)});
  expect_cuda_matches_cpu("avg_pool2d transposed",
                          [p](const TVec& v) { return ops::avg_pool2d(v[0].transpose(2, 3), p); },
                          {input({2, 3, 9, 12}, 4, DType::f32)});
  expect_cuda_matches_cpu("max_pool2d empty batch",
                          [p](const TVec& v) { return ops::max_pool2d(v[0], p); },
                          {input({0, 3, 9, 12}, 5, DType::f32)});
}

TEST(CudaPool, AdaptiveAvgPool) {
  TCV_REQUIRE_CUDA();
  const std::vector<std::array<int64_t, 2>> sizes = {{1, 1}, {3, 3}, {4, 5}, {7, 7}, {15, 2}};
  for (DType dt : {DType::f32, DType::f64})
    for (const auto& s : sizes)
      expect_cuda_matches_cpu(
          std::string("adaptive_avg_pool2d ") + dtype_name(dt),
          [s](const TVec& v) { return ops::adaptive_avg_pool2d(v[0], s); },
          {input({2, 3, 11, 7}, 6, dt)}, tol_for(dt));
  expect_cuda_matches_cpu("adaptive transposed",
                          [](const TVec& v) {
                            return ops::adaptive_avg_pool2d(v[0].transpose(2, 3), {3, 4});
                          },
                          {input({2, 3, 9, 10}, 7, DType::f32)});
}

}  // namespace
}  // namespace tcv
