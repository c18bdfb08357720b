// softmax and log_softmax on CUDA against the CPU, forward and backward:
// every dim of 1-D to 4-D inputs, with outer or inner of 1, r of 1, 7, 1000
// (odd) and 100000, inner > 32; f32 and f64; large logits (stability), rows
// with -inf entries and rows of only -inf (NaN as on the CPU); transposed
// (non-contiguous) input, 0-d and empty inputs.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/ops.h"
#include "engine/rng.h"
#include "support/cuda_compare.h"

namespace tcv {
namespace {

using testing::CudaCompareOptions;
using testing::expect_cuda_matches_cpu;
using TVec = std::vector<Tensor>;

Tensor input(const Shape& shape, uint64_t seed, DType dt, double scale = 3.0) {
  return testing::random_input(shape, seed, dt, true, -scale, scale);
}

CudaCompareOptions tol_for(DType dt) {
  CudaCompareOptions o;
  if (dt == DType::f64) {
    o.rtol = o.atol = 1e-10;
  } else {
    o.rtol = 1e-4;
    o.atol = 1e-5;
  }
  return o;
}

struct Case {
  Shape x;
  int64_t dim;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {{1000}, 0},         {{7, 1000}, 1},    {{1000, 7}, 0},    {{7, 1000}, 0},
      {{3, 1, 5}, 1},      {{3, 1}, 1},       {{1, 33}, 1},      {{4, 1000, 3}, 1},
      {{2, 3, 5, 4}, 0},   {{2, 3, 5, 4}, 1}, {{2, 3, 5, 4}, 2}, {{2, 3, 5, 4}, 3},
      {{2, 100000}, 1},    {{100000, 2}, 0},  {{8, 10, 64}, 1},  {{4096, 10}, 1},
      {{2, 7, 37, 3}, -2},
  };
  return c;
}

TEST(CudaSoftmax, ForwardBackward) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64})
    for (const Case& c : cases()) {
      const std::string tag =
          std::string(dtype_name(dt)) + " " + shape_str(c.x) + " dim " + std::to_string(c.dim);
      expect_cuda_matches_cpu(
          "softmax " + tag, [&c](const TVec& v) { return ops::softmax(v[0], c.dim); },
          {input(c.x, 1, dt)}, tol_for(dt));
      expect_cuda_matches_cpu(
          "log_softmax " + tag, [&c](const TVec& v) { return ops::log_softmax(v[0], c.dim); },
          {input(c.x, 2, dt)}, tol_for(dt));
    }
}

TEST(CudaSoftmax, LargeLogitsAreStable) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64}) {
    expect_cuda_matches_cpu(
        "softmax large", [](const TVec& v) { return ops::softmax(v[0], 1); },
        {input({16, 1000}, 3, dt, 500.0)}, tol_for(dt));
    expect_cuda_matches_cpu(
        "log_softmax large", [](const TVec& v) { return ops::log_softmax(v[0], 0); },
        {input({1000, 16}, 4, dt, 500.0)}, CudaCompareOptions{.atol = 1e-3, .rtol = 1e-5});
  }
}

TEST(CudaSoftmax, InfinityRows) {
  TCV_REQUIRE_CUDA();
  const double inf = std::numeric_limits<double>::infinity();
  // Row 0 has some -inf, row 1 only -inf (NaN on both devices), row 2 is plain.
  Tensor x = from_vector<double>(
                 {-inf, 1.0, 2.0, -inf, -inf, -inf, -inf, -inf, 0.5, -1.0, 3.0, 2.0}, {3, 4})
                 .to(DType::f32);
  for (bool log : {false, true})
    expect_cuda_matches_cpu(
        log ? "log_softmax -inf" : "softmax -inf",
        [log](const TVec& v) { return log ? ops::log_softmax(v[0], 1) : ops::softmax(v[0], 1); },
        {x}, CudaCompareOptions{.grads = false});
}

TEST(CudaSoftmax, NonContiguousZeroDimAndEmpty) {
  TCV_REQUIRE_CUDA();
  expect_cuda_matches_cpu(
      "softmax transposed", [](const TVec& v) { return ops::softmax(v[0].transpose(0, 1), 1); },
      {input({37, 129}, 5, DType::f32)}, tol_for(DType::f32));
  expect_cuda_matches_cpu(
      "log_softmax sliced",
      [](const TVec& v) { return ops::log_softmax(v[0].slice(1, 0, 100, 3), -1); },
      {input({9, 100}, 6, DType::f32)}, tol_for(DType::f32));
  expect_cuda_matches_cpu("softmax 0-d", [](const TVec& v) { return ops::softmax(v[0], 0); },
                          {input({}, 7, DType::f32)});
  expect_cuda_matches_cpu("log_softmax empty",
                          [](const TVec& v) { return ops::log_softmax(v[0], 1); },
                          {input({0, 5}, 8, DType::f32)});
  expect_cuda_matches_cpu("softmax empty dim", [](const TVec& v) { return ops::softmax(v[0], 1); },
                          {input({4, 0}, 9, DType::f64)});
}

TEST(CudaSoftmax, RejectsHalfLikeTheCpu) {
  TCV_REQUIRE_CUDA();
  const Tensor x = zeros({2, 3}, {.dtype = DType::bf16, .device = Device(DeviceType::CUDA, 0)});
  EXPECT_THROW(ops::softmax(x, 1), Error);
}

}  // namespace
}  // namespace tcv
