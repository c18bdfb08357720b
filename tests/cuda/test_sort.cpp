// sort and topk on CUDA against the CPU, values, indices and gradients:
// every dim of 1-D to 3-D inputs (outer or inner of 1), n of 1, 7, 1000 (odd)
// and 100000, many short lines; ascending/descending and largest/smallest with
// k of 0, 1, 5 and n; ties (equal values keep their input order), NaN (above
// every number), -0.0 and 0.0 (equal); f32, f64, f16, bf16, i32, i64, u8 and
// bool; transposed (non-contiguous), 0-d and empty inputs.
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

Tensor input(const Shape& shape, uint64_t seed, DType dt, bool grad = true) {
  return testing::random_input(shape, seed, dt, grad);
}

// Values in {0, 1, 2}: many ties.
Tensor ties(const Shape& shape, uint64_t seed, DType dt) {
  Generator g(seed);
  Tensor t = randint(0, 3, shape, {.dtype = DType::i64}, &g).to(dt);
  if (is_floating(dt)) t.set_requires_grad(true);
  return t;
}

// Sorting moves values without arithmetic: results match exactly.
const CudaCompareOptions kExact{.atol = 0, .rtol = 0};

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> d = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                       DType::i32, DType::i64, DType::u8,  DType::b8};
  return d;
}

struct Case {
  Shape x;
  int64_t dim;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {{1000}, 0},    {{7, 1000}, 1},  {{1000, 7}, 0},   {{3, 1, 5}, 1},
      {{4, 9, 3}, 1}, {{4, 9, 3}, 0},  {{4, 9, 3}, -1},  {{1}, 0},
      {{100000}, 0},  {{10000, 7}, 1}, {{2, 33, 65}, 1},
  };
  return c;
}

TVec both(const std::pair<Tensor, Tensor>& p) {
  return {p.first, p.second};
}

TEST(CudaSort, Sort) {
  TCV_REQUIRE_CUDA();
  for (DType dt : all_dtypes())
    for (const Case& c : cases())
      for (bool desc : {false, true})
        expect_cuda_matches_cpu(
            std::string("sort ") + dtype_name(dt) + " " + shape_str(c.x) + " dim " +
                std::to_string(c.dim) + (desc ? " desc" : ""),
            [&c, desc](const TVec& v) { return both(ops::sort(v[0], c.dim, desc)); },
            {input(c.x, 1, dt)}, kExact);
}

TEST(CudaSort, SortTiesAreStable) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::bf16, DType::i64, DType::u8, DType::b8})
    for (const Case& c : cases())
      for (bool desc : {false, true})
        expect_cuda_matches_cpu(
            std::string("sort ties ") + dtype_name(dt) + " " + shape_str(c.x) +
                (desc ? " desc" : ""),
            [&c, desc](const TVec& v) { return both(ops::sort(v[0], c.dim, desc)); },
            {ties(c.x, 2, dt)}, kExact);
}

TEST(CudaSort, NaNAndSignedZero) {
  TCV_REQUIRE_CUDA();
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const Tensor x = from_vector<double>(
      {1.0, nan, -0.0, 0.0, -inf, 2.0, nan, inf, -0.0, -3.0, 0.0, nan, 1.0, -1.0}, {2, 7});
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16})
    for (bool desc : {false, true}) {
      expect_cuda_matches_cpu(
          std::string("sort NaN ") + dtype_name(dt) + (desc ? " desc" : ""),
          [desc](const TVec& v) { return both(ops::sort(v[0], 1, desc)); }, {x.to(dt)}, kExact);
      for (int64_t k : {1, 3, 7})
        expect_cuda_matches_cpu(
            std::string("topk NaN ") + dtype_name(dt) + " k " + std::to_string(k) +
                (desc ? " largest" : " smallest"),
            [desc, k](const TVec& v) { return both(ops::topk(v[0], k, 1, desc)); }, {x.to(dt)},
            kExact);
    }
}

TEST(CudaSort, Topk) {
  TCV_REQUIRE_CUDA();
  for (DType dt : all_dtypes())
    for (const Case& c : cases()) {
      const int64_t dim = c.dim < 0 ? c.dim + static_cast<int64_t>(c.x.size()) : c.dim;
      const int64_t n = c.x[dim];
      for (int64_t k : {int64_t(0), int64_t(1), int64_t(5), n}) {
        if (k > n) continue;
        for (bool largest : {true, false})
          expect_cuda_matches_cpu(
              std::string("topk ") + dtype_name(dt) + " " + shape_str(c.x) + " k " +
                  std::to_string(k) + (largest ? " largest" : " smallest"),
              [&c, k, largest](const TVec& v) { return both(ops::topk(v[0], k, c.dim, largest)); },
              {input(c.x, 3, dt)}, kExact);
      }
    }
  // Ties go to the lower index.
  for (bool largest : {true, false})
    expect_cuda_matches_cpu(
        std::string("topk ties ") + (largest ? "largest" : "smallest"),
        [largest](const TVec& v) { return both(ops::topk(v[0], 4, 1, largest)); },
        {ties({50, 100}, 4, DType::f32)}, kExact);
}

TEST(CudaSort, NonContiguousZeroDimAndEmpty) {
  TCV_REQUIRE_CUDA();
  expect_cuda_matches_cpu(
      "sort transposed", [](const TVec& v) { return both(ops::sort(v[0].transpose(0, 1), 1)); },
      {input({37, 129}, 5, DType::f32)}, kExact);
  expect_cuda_matches_cpu(
      "topk sliced", [](const TVec& v) { return both(ops::topk(v[0].slice(1, 0, 100, 3), 3)); },
      {input({9, 100}, 6, DType::f32)}, kExact);
  expect_cuda_matches_cpu(
      "sort 0-d", [](const TVec& v) { return both(ops::sort(v[0], 0)); },
      {input({}, 7, DType::f32)}, kExact);
  expect_cuda_matches_cpu(
      "topk 0-d", [](const TVec& v) { return both(ops::topk(v[0], 1, 0)); },
      {input({}, 7, DType::f32)}, kExact);
  expect_cuda_matches_cpu(
      "sort empty", [](const TVec& v) { return both(ops::sort(v[0], 1)); },
      {input({0, 5}, 8, DType::f32)}, kExact);
  expect_cuda_matches_cpu(
      "topk empty line", [](const TVec& v) { return both(ops::topk(v[0], 0, 1)); },
      {input({4, 0}, 9, DType::f32)}, kExact);
}

}  // namespace
}  // namespace tcv
