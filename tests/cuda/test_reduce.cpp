// Reductions on CUDA against the CPU: sum over one dim, several dims (a
// non-contiguous block, permuted first) and everything, with outer or inner
// of 1 and r of 1, 1000 (odd) and ~1e5 (split over blocks); full sums of
// 1<<22 elements; f32, f64, f16, bf16 and integer/bool sums (to i64); mean and
// var built on sum; max/min with indices (first extreme, NaN wins, ties),
// argmax/argmin, full max/min of a big tensor; non-contiguous and empty
// inputs; gradients of every floating case.
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

Tensor input(const Shape& shape, uint64_t seed, DType dt, bool grad = true, double lo = -2.0,
             double hi = 2.0) {
  return testing::random_input(shape, seed, dt, grad, lo, hi);
}

// Small integers (many ties), as dt.
Tensor ties(const Shape& shape, uint64_t seed, DType dt, int64_t hi = 4, bool grad = false) {
  Generator g(seed);
  Tensor t = randint(0, hi, shape, {.dtype = DType::i64}, &g).to(dt);
  if (grad && is_floating(dt)) t.set_requires_grad(true);
  return t;
}

CudaCompareOptions tol_for(DType dt) {
  CudaCompareOptions o;
  if (dt == DType::f64) {
    o.rtol = o.atol = 1e-10;
  } else if (dt == DType::f16 || dt == DType::bf16) {
    o.rtol = 1e-2;
    o.atol = 1e-2;
  } else if (dt == DType::f32) {
    o.rtol = 1e-4;
    o.atol = 1e-4;
  }
  return o;
}

struct Case {
  Shape x;
  Shape dims;
  bool keepdim;
};

const std::vector<Case>& sum_cases() {
  static const std::vector<Case> cases = {
      {{1000}, {0}, false},                                      // full, r odd
      {{7, 1000}, {1}, false},                                   // rows (inner 1)
      {{1000, 7}, {0}, true},                                    // columns (outer 1)
      {{3, 1, 5}, {1}, false},                                   // r = 1
      {{4, 1000, 3}, {1}, false},                                // outer, r, inner all > 1
      {{2, 3, 4, 5}, {0, 2}, true},                              // not one block: permuted
      {{2, 3, 4, 5}, {1, 2}, false},                             // a block of two dims
      {{2, 3, 4, 5}, {}, false},                                 // everything
      {{1, 1}, {1}, false},          {{3, 100001}, {1}, false},  // few long rows: split over blocks
      {{100001, 3}, {0}, false},     // few long columns: split over blocks
      {{2, 70001, 40}, {1}, false},  // long columns, inner > 32
  };
  return cases;
}

TEST(CudaReduce, SumFloat) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16})
    for (const Case& c : sum_cases()) {
      expect_cuda_matches_cpu(
          std::string("sum ") + dtype_name(dt) + " " + shape_str(c.x),
          [&c](const TVec& v) { return ops::sum(v[0], c.dims, c.keepdim); }, {input(c.x, 1, dt)},
          tol_for(dt));
    }
}

TEST(CudaReduce, SumIntegerAndBool) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::i32, DType::i64, DType::u8, DType::b8})
    for (const Case& c : sum_cases())
      expect_cuda_matches_cpu(
          std::string("sum ") + dtype_name(dt) + " " + shape_str(c.x),
          [&c](const TVec& v) { return ops::sum(v[0], c.dims, c.keepdim); },
          {ties(c.x, 2, dt, dt == DType::b8 ? 2 : 100)}, CudaCompareOptions{.atol = 0, .rtol = 0});
}

TEST(CudaReduce, SumLargeFull) {
  TCV_REQUIRE_CUDA();
  // 1<<22 elements (and an odd size): the two-pass block reduction.
  for (int64_t n : {int64_t(1) << 22, (int64_t(1) << 22) + 37})
    expect_cuda_matches_cpu(
        "sum large " + std::to_string(n), [](const TVec& v) { return ops::sum(v[0]); },
        {input({n}, 3, DType::f32, true, 0.0, 1.0)},
        CudaCompareOptions{.atol = 1e-3, .rtol = 1e-5});
  expect_cuda_matches_cpu(
      "sum large f64", [](const TVec& v) { return ops::sum(v[0]); },
      {input({int64_t(1) << 22}, 4, DType::f64)}, CudaCompareOptions{.atol = 1e-8, .rtol = 1e-10});
  expect_cuda_matches_cpu(
      "sum large i64", [](const TVec& v) { return ops::sum(v[0]); },
      {ties({int64_t(1) << 22}, 5, DType::i32, 1000)}, CudaCompareOptions{.atol = 0, .rtol = 0});
  // 4-D, reduced over all but the channel dim (batch-norm statistics).
  expect_cuda_matches_cpu(
      "sum NCHW over N,H,W",
      [](const TVec& v) {
        return ops::sum(v[0], {0, 2, 3});
      },
      {input({16, 32, 56, 56}, 6, DType::f32)}, tol_for(DType::f32));
}

TEST(CudaReduce, SumNonContiguousAndEmpty) {
  TCV_REQUIRE_CUDA();
  expect_cuda_matches_cpu(
      "sum transposed", [](const TVec& v) { return ops::sum(v[0].transpose(0, 1), {1}); },
      {input({33, 65}, 7, DType::f32)}, tol_for(DType::f32));
  expect_cuda_matches_cpu(
      "sum sliced", [](const TVec& v) { return ops::sum(v[0].slice(1, 1, 60, 3), {0}); },
      {input({17, 64}, 8, DType::f32)}, tol_for(DType::f32));
  expect_cuda_matches_cpu("sum empty r", [](const TVec& v) { return ops::sum(v[0], {0}); },
                          {input({0, 5}, 9, DType::f32)});
  expect_cuda_matches_cpu("sum empty out", [](const TVec& v) { return ops::sum(v[0], {0}); },
                          {input({5, 0}, 9, DType::f32)});
  expect_cuda_matches_cpu("sum 0-d", [](const TVec& v) { return ops::sum(v[0]); },
                          {input({}, 9, DType::f32)});
}

TEST(CudaReduce, MeanAndVar) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64})
    for (const Case& c : sum_cases()) {
      expect_cuda_matches_cpu(
          std::string("mean ") + dtype_name(dt) + " " + shape_str(c.x),
          [&c](const TVec& v) { return ops::mean(v[0], c.dims, c.keepdim); }, {input(c.x, 10, dt)},
          tol_for(dt));
      expect_cuda_matches_cpu(
          std::string("var ") + dtype_name(dt) + " " + shape_str(c.x),
          [&c](const TVec& v) { return ops::var(v[0], c.dims, 1, c.keepdim); },
          {input(c.x, 11, dt)}, tol_for(dt));
    }
  expect_cuda_matches_cpu("mean empty (NaN)", [](const TVec& v) { return ops::mean(v[0], {0}); },
                          {input({0, 4}, 12, DType::f32)});
}

struct ExtCase {
  Shape x;
  int64_t dim;
};

const std::vector<ExtCase>& ext_cases() {
  static const std::vector<ExtCase> cases = {
      {{1000}, 0},       {{7, 1000}, 1},     {{1000, 7}, 0},   {{3, 1, 5}, 1},   {{4, 1000, 3}, 1},
      {{2, 3, 4, 5}, 2}, {{2, 3, 4, 5}, -1}, {{3, 100001}, 1}, {{100001, 3}, 0}, {{1}, 0},
  };
  return cases;
}

TVec both(const std::pair<Tensor, Tensor>& p) {
  return {p.first, p.second};
}

TEST(CudaReduce, MaxMinWithIndices) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64,
                   DType::u8, DType::b8})
    for (const ExtCase& c : ext_cases())
      for (bool keep : {false, true}) {
        const std::string tag = std::string(dtype_name(dt)) + " " + shape_str(c.x);
        const Tensor x = is_floating(dt) ? input(c.x, 13, dt) : ties(c.x, 13, dt, 50);
        expect_cuda_matches_cpu(
            "max " + tag, [&c, keep](const TVec& v) { return both(ops::max(v[0], c.dim, keep)); },
            {x}, tol_for(dt));
        expect_cuda_matches_cpu(
            "min " + tag, [&c, keep](const TVec& v) { return both(ops::min(v[0], c.dim, keep)); },
            {x}, tol_for(dt));
      }
}

TEST(CudaReduce, MaxMinTiesTakeTheFirst) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::bf16, DType::i64})
    for (const ExtCase& c : ext_cases()) {
      const Tensor x = ties(c.x, 14, dt, 3, true);
      expect_cuda_matches_cpu(
          std::string("max ties ") + dtype_name(dt) + " " + shape_str(c.x),
          [&c](const TVec& v) { return both(ops::max(v[0], c.dim)); }, {x}, tol_for(dt));
      expect_cuda_matches_cpu(
          std::string("argmin ties ") + dtype_name(dt) + " " + shape_str(c.x),
          [&c](const TVec& v) { return ops::argmin(v[0], c.dim); }, {x}, tol_for(dt));
    }
  // One long line of ties: the first position must survive the split over blocks.
  expect_cuda_matches_cpu("argmax ties 1<<22", [](const TVec& v) { return ops::argmax(v[0], 0); },
                          {ties({int64_t(1) << 22}, 15, DType::f32, 4)});
}

TEST(CudaReduce, MaxMinNaNWins) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64, DType::bf16})
    for (const ExtCase& c : ext_cases()) {
      Tensor x = input(c.x, 16, DType::f64, false);
      // NaN at about one element in 7, so some lines have none, some several.
      Generator g(17);
      Tensor m = ops::lt(uniform(c.x, 0.0, 1.0, {.dtype = DType::f64}, &g), 1.0 / 7.0);
      x = ops::masked_fill(x, m, std::nan("")).to(dt);
      for (bool is_max : {true, false})
        expect_cuda_matches_cpu(
            std::string(is_max ? "max" : "min") + " NaN " + dtype_name(dt) + " " + shape_str(c.x),
            [&c, is_max](const TVec& v) {
              return both(is_max ? ops::max(v[0], c.dim) : ops::min(v[0], c.dim));
            },
            {x}, tol_for(dt));
    }
}

TEST(CudaReduce, FullMaxMinArgmax) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    const Tensor x = input({int64_t(1) << 22}, 18, dt);
    expect_cuda_matches_cpu(
        std::string("max all ") + dtype_name(dt), [](const TVec& v) { return ops::max(v[0]); }, {x},
        tol_for(dt));
    expect_cuda_matches_cpu(
        std::string("min all ") + dtype_name(dt), [](const TVec& v) { return ops::min(v[0]); }, {x},
        tol_for(dt));
    expect_cuda_matches_cpu(
        std::string("argmax 2-D ") + dtype_name(dt),
        [](const TVec& v) {
          return ops::argmax(v[0].reshape({1024, 4096}), 1, true);
        },
        {x}, tol_for(dt));
  }
  expect_cuda_matches_cpu("max 0-d", [](const TVec& v) { return both(ops::max(v[0], 0)); },
                          {input({}, 19, DType::f32)});
  expect_cuda_matches_cpu("max transposed",
                          [](const TVec& v) { return both(ops::max(v[0].transpose(0, 1), 1)); },
                          {input({33, 65}, 20, DType::f32)});
  expect_cuda_matches_cpu("max empty outer", [](const TVec& v) { return both(ops::max(v[0], 1)); },
                          {input({0, 5}, 21, DType::f32)});
}

TEST(CudaReduce, MaxOverEmptyDimThrows) {
  TCV_REQUIRE_CUDA();
  const Tensor x = zeros({3, 0}, {.device = Device(DeviceType::CUDA, 0)});
  EXPECT_THROW(ops::max(x, 1), Error);
}

}  // namespace
}  // namespace tcv
