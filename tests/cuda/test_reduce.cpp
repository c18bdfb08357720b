// Reductions on CUDA against the CPU beyond the op table's cases
// (tests/ops/cases_reduce.cpp): lines long enough to be split over blocks
// (~1e5 values), full sums of 1<<22 elements (the two-pass block reduction),
// batch-norm statistics over N, H, W of an activation, max/min where NaN wins,
// ties over a line split over blocks, and the error of a max over an empty dim.
// Tolerances as the table's: γₙ·Σ|x| for sums, exact for selection.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/ops.h"
#include "engine/rng.h"
#include "support/cuda_compare.h"

namespace tcv {
namespace {

using namespace testing;
using TVec = std::vector<Tensor>;

// Small integers (many ties), as dt.
Tensor ties(const Shape& shape, uint64_t seed, DType dt, int64_t hi) {
  Generator g(seed);
  return randint(0, hi, shape, {.dtype = DType::i64}, &g).to(dt);
}

Tol sum_of(int64_t n) {
  return {.ulps = 1, .terms = n};
}
const Tol kSelection{.terms = 1, .sums = Sums::routed};

TVec both(const std::pair<Tensor, Tensor>& p) {
  return {p.first, p.second};
}

struct Split {
  Shape x;
  int64_t dim;
};
// Few long rows, few long columns, long columns with inner > 32: split over blocks.
const Split kSplit[] = {{{3, 100001}, 1}, {{100001, 3}, 0}, {{2, 70001, 40}, 1}};

TEST(CudaReduce, SumSplitOverBlocks) {
  TCV_REQUIRE_CUDA();
  for (const Split& c : kSplit) {
    const int64_t n = c.x[static_cast<size_t>(c.dim)];
    for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16})
      expect_cuda_matches_cpu(
          std::string("sum ") + dtype_name(dt) + " " + shape_str(c.x),
          [&c](const TVec& v) { return ops::sum(v[0], {c.dim}); }, {random_input(c.x, 1, dt)},
          sum_of(n));
    for (DType dt : {DType::i32, DType::i64, DType::u8, DType::b8})
      expect_cuda_matches_cpu(
          std::string("sum ") + dtype_name(dt) + " " + shape_str(c.x),
          [&c](const TVec& v) { return ops::sum(v[0], {c.dim}); },
          {ties(c.x, 2, dt, dt == DType::b8 ? 2 : 100)}, Tol{});
  }
}

TEST(CudaReduce, SumLargeFull) {
  TCV_REQUIRE_CUDA();
  // 1<<22 elements (and an odd size): the two-pass block reduction.
  for (int64_t n : {int64_t(1) << 22, (int64_t(1) << 22) + 37})
    expect_cuda_matches_cpu(
        "sum large " + std::to_string(n), [](const TVec& v) { return ops::sum(v[0]); },
        {random_input({n}, 3, DType::f32, true, 0.0, 1.0)}, sum_of(n));
  expect_cuda_matches_cpu(
      "sum large f64", [](const TVec& v) { return ops::sum(v[0]); },
      {random_input({int64_t(1) << 22}, 4, DType::f64)}, sum_of(int64_t(1) << 22));
  expect_cuda_matches_cpu(
      "sum large i64", [](const TVec& v) { return ops::sum(v[0]); },
      {ties({int64_t(1) << 22}, 5, DType::i32, 1000)}, Tol{});
  // 4-D, reduced over all but the channel dim (batch-norm statistics).
  expect_cuda_matches_cpu(
      "sum NCHW over N,H,W",
      [](const TVec& v) {
        return ops::sum(v[0], {0, 2, 3});
      },
      {random_input({16, 32, 56, 56}, 6, DType::f32)}, sum_of(16 * 56 * 56));
}

TEST(CudaReduce, MaxMinSplitOverBlocks) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64,
                   DType::u8, DType::b8})
    for (const Split& c : {kSplit[0], kSplit[1]})
      for (bool keep : {false, true}) {
        const std::string tag = std::string(dtype_name(dt)) + " " + shape_str(c.x);
        const Tensor x = is_floating(dt) ? random_input(c.x, 13, dt) : ties(c.x, 13, dt, 50);
        expect_cuda_matches_cpu(
            "max " + tag, [&c, keep](const TVec& v) { return both(ops::max(v[0], c.dim, keep)); },
            {x}, kSelection);
        expect_cuda_matches_cpu(
            "min " + tag, [&c, keep](const TVec& v) { return both(ops::min(v[0], c.dim, keep)); },
            {x}, kSelection);
      }
}

struct ExtCase {
  Shape x;
  int64_t dim;
};

TEST(CudaReduce, MaxMinNaNWins) {
  TCV_REQUIRE_CUDA();
  const std::vector<ExtCase> cases = {
      {{1000}, 0},       {{7, 1000}, 1},     {{1000, 7}, 0},   {{3, 1, 5}, 1},   {{4, 1000, 3}, 1},
      {{2, 3, 4, 5}, 2}, {{2, 3, 4, 5}, -1}, {{3, 100001}, 1}, {{100001, 3}, 0}, {{1}, 0},
  };
  for (DType dt : {DType::f32, DType::f64, DType::bf16})
    for (const ExtCase& c : cases) {
      Tensor x = random_input(c.x, 16, DType::f64, false);
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
            {x}, Tol{});
    }
}

TEST(CudaReduce, FullMaxMinArgmax) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    const Tensor x = random_input({int64_t(1) << 22}, 18, dt);
    expect_cuda_matches_cpu(
        std::string("max all ") + dtype_name(dt), [](const TVec& v) { return ops::max(v[0]); }, {x},
        kSelection);
    expect_cuda_matches_cpu(
        std::string("min all ") + dtype_name(dt), [](const TVec& v) { return ops::min(v[0]); }, {x},
        kSelection);
    expect_cuda_matches_cpu(
        std::string("argmax 2-D ") + dtype_name(dt),
        [](const TVec& v) {
          return ops::argmax(v[0].reshape({1024, 4096}), 1, true);
        },
        {x.detach()}, Tol{});
  }
  // One long line of ties: the first position must survive the split over blocks.
  expect_cuda_matches_cpu(
      "argmax ties 1<<22", [](const TVec& v) { return ops::argmax(v[0], 0); },
      {ties({int64_t(1) << 22}, 15, DType::f32, 4)}, Tol{});
}

TEST(CudaReduce, MaxOverEmptyDimThrows) {
  TCV_REQUIRE_CUDA();
  const Tensor x = zeros({3, 0}, {.device = Device(DeviceType::CUDA, 0)});
  EXPECT_THROW(ops::max(x, 1), Error);
}

}  // namespace
}  // namespace tcv
