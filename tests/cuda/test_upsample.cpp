// upsample on CUDA against the CPU: nearest (2x, non-integer up, down, equal
// size) and bilinear with align_corners false and true (same sizes, plus a
// size-1 output), f32 and f64, forward and backward (atomic scatter on the
// GPU), odd sizes, non-contiguous input, empty batch.
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

const std::vector<std::array<int64_t, 2>> kSizes = {{10, 14}, {13, 9}, {3, 4}, {5, 7}, {1, 1}};

TEST(CudaUpsample, Nearest) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64})
    for (const auto& s : kSizes)
      expect_cuda_matches_cpu(
          std::string("nearest ") + dtype_name(dt),
          [s](const TVec& v) { return ops::upsample(v[0], s, {.mode = ops::InterpMode::nearest}); },
          {input({2, 3, 5, 7}, 1, dt)}, tol_for(dt));
}

TEST(CudaUpsample, Bilinear) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64})
    for (bool align : {false, true})
      for (const auto& s : kSizes)
        expect_cuda_matches_cpu(
            std::string("bilinear ") + dtype_name(dt) + (align ? " align" : ""),
            [s, align](const TVec& v) {
              return ops::upsample(v[0], s,
                                   {.mode = ops::InterpMode::bilinear, .align_corners = align});
            },
            {input({2, 3, 5, 7}, 2, dt)}, tol_for(dt));
}

TEST(CudaUpsample, NonContiguousAndEmpty) {
  TCV_REQUIRE_CUDA();
  expect_cuda_matches_cpu(
      "bilinear transposed",
      [](const TVec& v) {
        return ops::upsample(v[0].transpose(2, 3), {11, 9}, {.mode = ops::InterpMode::bilinear});
      },
      {input({2, 3, 6, 4}, 3, DType::f32)});
  expect_cuda_matches_cpu("nearest empty batch",
                          [](const TVec& v) {
                            return ops::upsample(v[0], {8, 8}, {.mode = ops::InterpMode::nearest});
                          },
                          {input({0, 3, 4, 4}, 4, DType::f32)});
}

}  // namespace
}  // namespace tcv
