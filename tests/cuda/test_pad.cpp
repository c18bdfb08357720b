// pad on CUDA against the CPU: constant (zero, a value, negative pads that
// crop), reflect and replicate over the last one, two and three dims of 1-D to
// 4-D inputs; f32, f64, bf16 and f16 with gradients (the backward folds
// reflected/replicated borders back with atomics), integer and bool forward,
// non-contiguous input, empty input.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "engine/rng.h"
#include "support/cuda_compare.h"

namespace tcv {
namespace {

using testing::CudaCompareOptions;
using testing::expect_cuda_matches_cpu;
using TVec = std::vector<Tensor>;

Tensor input(const Shape& shape, uint64_t seed, DType dt, bool grad = true) {
  return testing::random_input(shape, seed, dt, grad);
}

CudaCompareOptions tol_for(DType dt) {
  CudaCompareOptions o;
  if (dt == DType::f64) {
    o.rtol = o.atol = 1e-12;
  } else if (dt == DType::f16 || dt == DType::bf16) {
    o.rtol = 1e-2;
    o.atol = 1e-2;
  }
  return o;
}

struct Case {
  Shape x;
  Shape pads;
};

TEST(CudaPad, Constant) {
  TCV_REQUIRE_CUDA();
  const std::vector<Case> cases = {{{7}, {2, 3}},
                                   {{3, 5}, {1, 0, 2, 2}},
                                   {{2, 3, 5, 4}, {1, 2, 3, 1}},
                                   {{2, 3, 5, 4}, {-1, 2, 0, -2}},
                                   {{2, 3, 5, 4}, {1, 1, 1, 1, 1, 1}}};
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16})
    for (const Case& c : cases)
      for (double value : {0.0, 1.5})
        expect_cuda_matches_cpu(
            std::string("constant ") + dtype_name(dt),
            [&c, value](const TVec& v) {
              return ops::pad(v[0], c.pads, ops::PadMode::constant, value);
            },
            {input(c.x, 1, dt)}, tol_for(dt));
}

TEST(CudaPad, ReflectAndReplicate) {
  TCV_REQUIRE_CUDA();
  const std::vector<Case> cases = {{{2, 9}, {3, 2}},
                                   {{2, 3, 5, 7}, {2, 3, 4, 1}},
                                   {{1, 2, 4, 5, 6}, {1, 2, 3, 0, 2, 3}},
                                   {{2, 3, 5, 4}, {-1, 2, 1, 0}}};
  for (auto mode : {ops::PadMode::reflect, ops::PadMode::replicate})
    for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
      // The CPU folds borders back adding in bf16 step by step; the GPU adds in f32
      // and rounds once: their bf16 gradients differ by a few bf16 ulps.
      CudaCompareOptions o = tol_for(dt);
      if (dt == DType::bf16) o.atol = 5e-2;
      for (const Case& c : cases)
        expect_cuda_matches_cpu(
            std::string(mode == ops::PadMode::reflect ? "reflect " : "replicate ") + dtype_name(dt),
            [&c, mode](const TVec& v) { return ops::pad(v[0], c.pads, mode); }, {input(c.x, 2, dt)},
            o);
    }
  // Replicate pads wider than the input.
  expect_cuda_matches_cpu("replicate wide",
                          [](const TVec& v) {
                            return ops::pad(v[0], {6, 5, 4, 7}, ops::PadMode::replicate);
                          },
                          {input({2, 2, 3, 2}, 3, DType::f32)});
}

TEST(CudaPad, IntegersNonContiguousEmpty) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::i64, DType::i32, DType::u8, DType::b8})
    expect_cuda_matches_cpu(std::string("constant ") + dtype_name(dt),
                            [](const TVec& v) {
                              return ops::pad(v[0], {1, 2, 2, 1}, ops::PadMode::constant, 1.0);
                            },
                            {input({2, 3, 4}, 4, dt)});
  expect_cuda_matches_cpu("reflect i64",
                          [](const TVec& v) {
                            return ops::pad(v[0], {2, 1}, ops::PadMode::reflect);
                          },
                          {input({3, 5}, 5, DType::i64)});
  expect_cuda_matches_cpu(
      "reflect transposed",
      [](const TVec& v) {
        return ops::pad(v[0].transpose(0, 1), {2, 1, 1, 2}, ops::PadMode::reflect);
      },
      {input({6, 5}, 6, DType::f32)});
  expect_cuda_matches_cpu("constant to empty output",
                          [](const TVec& v) {
                            return ops::pad(v[0], {1, 1, 0, 0}, ops::PadMode::constant, 2.0);
                          },
                          {input({0, 3}, 7, DType::f32)});
  expect_cuda_matches_cpu("constant from empty input",
                          [](const TVec& v) {
                            return ops::pad(v[0], {0, 0, 1, 1});
                          },
                          {input({0, 3}, 8, DType::f32)});
}

}  // namespace
}  // namespace tcv
