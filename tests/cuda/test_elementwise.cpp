// Elementwise ops on CUDA against the CPU beyond the op table's cases
// (tests/ops/cases_elementwise.cpp): the paths of the CUDA loops
// (kernels/cuda/loops.cuh) — every tail length of the 4-wide vector loop,
// misaligned operands falling back to the scalar loop, mixed dtypes, broadcast
// and strided offsets through FastDivmod, grids that iterate, the 64-bit index
// variants — and in-place arithmetic and fill on views. Tolerances as the
// table's: one rounding for +, −, × (a broadcast gradient summing its terms),
// 8 ulps for exp and sigmoid, exact for comparisons and copies.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "support/cuda_compare.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using namespace testing;
using TVec = std::vector<Tensor>;

/// + and − (and relu of them): one rounding; a gradient sums `terms` values of dy.
Tol add_tol(int64_t terms = 1) {
  return {.ulps = 1, .terms = terms, .sums = Sums::routed};
}
/// ×: one rounding; a gradient sums `terms` products dy·b, each rounded in the dtype.
Tol mul_tol(int64_t terms = 1) {
  return {.ulps = 1, .terms = terms + 1, .term_ulps = 1};
}
const Tol kTranscendental{.ulps = 8, .grad_ulps = 16, .grad_scale = 1};

TEST(CudaElementwise, StridedViewsAndChains) {
  TCV_REQUIRE_CUDA();
  // (x + b)·σ(x): each factor within its own roundings of its value (10 ulps);
  // dx = g·σ + g(x + b)σ(1 − σ) adds two terms of at most 1 (|x + b| ≤ 4), db
  // sums 3 of them.
  Tensor a = random_input({6, 8, 10}, 10), b = random_input({10, 8}, 11);
  expect_cuda_matches_cpu(
      "transposed operands",
      [](const TVec& v) {
        Tensor x = v[0].permute({2, 0, 1}).slice(1, 1, 6, 2);  // (10, 3, 8), strided
        return ops::mul(ops::add(x, v[1].unsqueeze(1)), ops::sigmoid(x));
      },
      {a, b}, {.ulps = 10, .grad_ulps = 16, .grad_scale = 6});
  expect_cuda_matches_cpu("scalar ops",
                          [](const TVec& v) { return ops::add(ops::mul(v[0], 2.5), 1.0); }, {a},
                          {.ulps = 2, .scale = 5});
}

TEST(CudaElementwise, InPlaceArithmeticAndFill) {
  TCV_REQUIRE_CUDA();
  // (c + 0.5b)·b rounds three times, the first relative to 0.5|b| ≤ 1, times |b| ≤ 2.
  Tensor c = random_input({5, 6}, 14, DType::f32, false),
         b = random_input({6}, 15, DType::f32, false);
  expect_cuda_matches_cpu("in place add_/mul_/fill_",
                          [](const TVec& v) {
                            Tensor t = v[0].clone();
                            t.add_(v[1], 0.5);
                            t.mul_(v[1]);
                            t.slice(0, 0, 2).fill_(7.0);
                            return t;
                          },
                          {c, b}, {.ulps = 3, .scale = 2});
}

TEST(CudaElementwise, LargeTensor) {
  TCV_REQUIRE_CUDA();
  Tensor a = random_input({(1 << 22) + 3}, 17, DType::f32, false);
  expect_cuda_matches_cpu(
      "large relu", [](const TVec& v) { return ops::relu(v[0]); }, {a}, Tol{});
}

// The loops in kernels/cuda/loops.cuh: four elements per thread with vector
// accesses when every operand is aligned to four of its elements, the n % 4
// last ones one at a time, the scalar loop otherwise, and strided offsets
// through FastDivmod below 2^31 elements.
const int64_t kTailLengths[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 255, 256, 257, 1022, 1023, 1025};

TEST(CudaElementwise, ContiguousEveryTail) {
  TCV_REQUIRE_CUDA();
  for (int64_t n : kTailLengths) {
    SCOPED_TRACE("n = " + std::to_string(n));
    for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      Tensor a = random_input({n}, 20 + n, dt), b = random_input({n}, 40 + n, dt);
      expect_cuda_matches_cpu(
          "add", [](const TVec& v) { return ops::add(v[0], v[1]); }, {a, b}, add_tol());
      expect_cuda_matches_cpu(
          "exp", [](const TVec& v) { return ops::exp(v[0]); }, {a}, kTranscendental);
    }
    Tensor x = random_input({n}, 60 + n), y = random_input({n}, 80 + n);
    Tensor c = random_input({n}, 90 + n, DType::f32, false);
    expect_cuda_matches_cpu(
        "mul", [](const TVec& v) { return ops::mul(v[0], v[1]); }, {x, y}, mul_tol());
    expect_cuda_matches_cpu(
        "where", [](const TVec& v) { return ops::where(ops::gt(v[2], 0.0), v[0], v[1]); },
        {x, y, c}, {.terms = 1, .sums = Sums::routed});
    Tensor i = testing::iota({n}, DType::i64, -7), j = testing::iota({n}, DType::i32, 3);
    expect_cuda_matches_cpu(
        "int add", [](const TVec& v) { return ops::add(v[0], v[1]); }, {i, j}, Tol{});
  }
}

TEST(CudaElementwise, MisalignedOperandsFallBack) {
  TCV_REQUIRE_CUDA();
  // Views starting s elements in: s = 1, 2, 3 break the vector alignment of
  // f32 (16 bytes), s = 4 keeps it; for f16 (8 bytes) s = 2 breaks it too.
  for (int64_t n : {3, 4, 5, 8, 1023, 1024}) {
    for (int64_t s : {1, 2, 3, 4}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", start = " + std::to_string(s));
      Tensor a = random_input({n + 4}, 100 + n, DType::f32),
             b = random_input({n + 4}, 110 + n, DType::f32);
      expect_cuda_matches_cpu(
          "first input misaligned",
          [n, s](const TVec& v) { return ops::add(v[0].slice(0, s, s + n), v[1].slice(0, 0, n)); },
          {a, b}, add_tol());
      expect_cuda_matches_cpu(
          "second input misaligned",
          [n, s](const TVec& v) { return ops::mul(v[0].slice(0, 0, n), v[1].slice(0, s, s + n)); },
          {a, b}, mul_tol());
      expect_cuda_matches_cpu(
          "unary misaligned",
          [n, s](const TVec& v) { return ops::sigmoid(v[0].slice(0, s, s + n)); }, {a},
          kTranscendental);
      const Tensor ac = a.detach(), bc = b.detach();
      // t = a + 0.5b rounds twice (the first relative to 0.5|b| ≤ 1), then × b (|b| ≤ 2).
      expect_cuda_matches_cpu("output misaligned (in place)",
                              [n, s](const TVec& v) {
                                Tensor t = v[0].clone();
                                t.slice(0, s, s + n).add_(v[1].slice(0, 0, n), 0.5);
                                t.slice(0, s, s + n).mul_(v[1].slice(0, 4, 4 + n));
                                return t;
                              },
                              {ac, bc}, {.ulps = 3, .scale = 2});
      expect_cuda_matches_cpu(
          "bool out, misaligned f32 in",
          [n, s](const TVec& v) { return ops::lt(v[0].slice(0, s, s + n), v[1].slice(0, 0, n)); },
          {ac, bc}, Tol{});
      Tensor h = random_input({n + 4}, 120 + n, DType::f16),
             g = random_input({n + 4}, 130 + n, DType::f16);
      expect_cuda_matches_cpu(
          "f16 misaligned",
          [n, s](const TVec& v) { return ops::sub(v[0].slice(0, s, s + n), v[1].slice(0, 0, n)); },
          {h, g}, add_tol());
    }
  }
}

TEST(CudaElementwise, MixedTypesContiguous) {
  TCV_REQUIRE_CUDA();
  const Tol cast{.ulps = 1};  // one rounding to the narrower type
  for (int64_t n : kTailLengths) {
    SCOPED_TRACE("n = " + std::to_string(n));
    Tensor a = random_input({n}, 140 + n, DType::f32, false),
           b = random_input({n}, 150 + n, DType::f32, false);
    expect_cuda_matches_cpu(
        "ge -> bool", [](const TVec& v) { return ops::ge(v[0], v[1]); }, {a, b}, Tol{});
    Tensor hb = random_input({n}, 160 + n, DType::bf16, false);
    Tensor hc = random_input({n}, 170 + n, DType::bf16, false);
    expect_cuda_matches_cpu(
        "bf16 gt -> bool", [](const TVec& v) { return ops::gt(v[0], v[1]); }, {hb, hc}, Tol{});
    expect_cuda_matches_cpu(
        "f32 -> bf16", [](const TVec& v) { return v[0].to(DType::bf16); }, {a}, cast);
    expect_cuda_matches_cpu(
        "bf16 -> f32", [](const TVec& v) { return v[0].to(DType::f32); }, {hb}, Tol{});
    expect_cuda_matches_cpu(
        "f32 -> f16 -> f64", [](const TVec& v) { return v[0].to(DType::f16).to(DType::f64); }, {a},
        Tol{});
    expect_cuda_matches_cpu(
        "bool -> f32 (where)",
        [](const TVec& v) { return ops::where(ops::lt(v[0], v[1]), v[1], v[0]); }, {a, b}, Tol{});
    // A misaligned source: the cast falls back to the scalar loop.
    expect_cuda_matches_cpu(
        "f32 view -> bf16", [n](const TVec& v) { return v[0].slice(0, 1, n).to(DType::bf16); }, {a},
        cast);
  }
}

TEST(CudaElementwise, BroadcastAndStridedOffsets) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
    for (const Shape& s : {Shape{2, 3, 5, 7}, Shape{4, 16, 9, 9}, Shape{3, 5, 1, 6}}) {
      // The bias's gradient sums N·H·W values.
      const int64_t m = s[0] * s[2] * s[3];
      Tensor x = random_input(s, 200, dt), bias = random_input({1, s[1], 1, 1}, 201, dt);
      expect_cuda_matches_cpu(
          "bias add (N,C,H,W) + (1,C,1,1)", [](const TVec& v) { return ops::add(v[0], v[1]); },
          {x, bias}, add_tol(m));
      expect_cuda_matches_cpu(
          "scale (1,C,1,1) * (N,C,H,W)", [](const TVec& v) { return ops::mul(v[1], v[0]); },
          {x, bias}, mul_tol(m));
    }
  }
  Tensor a = random_input({37, 19}, 210), b = random_input({19, 37}, 211);
  expect_cuda_matches_cpu(
      "transposed operand", [](const TVec& v) { return ops::add(v[0], v[1].t()); }, {a, b},
      add_tol());
  expect_cuda_matches_cpu(
      "transposed output shape", [](const TVec& v) { return ops::sub(v[0].t(), v[1]); }, {a, b},
      add_tol());
  Tensor c = random_input({6, 5, 4, 3}, 212),
         d = random_input({3, 1, 4, 1}, 213);  // (3, 4, 4, 6) out
  expect_cuda_matches_cpu(
      "permuted and broadcast",
      [](const TVec& v) {
        return ops::mul(v[0].permute({3, 1, 2, 0}).slice(1, 1, 5), v[1]);
      },
      {c, d}, mul_tol(24));
  Tensor m = random_input({7, 1, 9}, 214), r = random_input({7, 11, 1}, 215);
  expect_cuda_matches_cpu(
      "outer broadcast", [](const TVec& v) { return ops::maximum(v[0], v[1]); }, {m, r},
      add_tol(11));
  expect_cuda_matches_cpu(
      "where over broadcast",
      [](const TVec& v) { return ops::where(ops::gt(v[1], 0.0), v[0], v[1].t()); },
      {random_input({9, 9}, 216), random_input({9, 9}, 217)}, {.terms = 2, .sums = Sums::routed});
}

TEST(CudaElementwise, GridStrideIteratesMoreThanOnce) {
  TCV_REQUIRE_CUDA();
  // More elements than an H200's grid holds in one pass (132 SMs x 16 blocks
  // x 256 threads x 4 per vector = 2,162,688): every path loops.
  const int64_t n = 2 * 2162688 + 3;
  Tensor a = random_input({n}, 220, DType::f32, false),
         b = random_input({n}, 221, DType::f32, false);
  expect_cuda_matches_cpu(
      "large vector add", [](const TVec& v) { return ops::add(v[0], v[1]); }, {a, b}, add_tol());
  expect_cuda_matches_cpu(
      "large misaligned add",
      [n](const TVec& v) { return ops::add(v[0].slice(0, 1, n), v[1].slice(0, 0, n - 1)); }, {a, b},
      add_tol());
  Tensor x = random_input({2, 64, 130, 140}, 222, DType::f32, false);
  Tensor bias = random_input({1, 64, 1, 1}, 223, DType::f32, false);
  expect_cuda_matches_cpu(
      "large bias add", [](const TVec& v) { return ops::add(v[0], v[1]); }, {x, bias}, add_tol());
  expect_cuda_matches_cpu(
      "large transposed", [](const TVec& v) { return ops::mul(v[0].transpose(2, 3), 2.0); }, {x},
      mul_tol());
}

// The 64-bit index variants (WideDivmod), which tensors below 2^31 elements
// never reach on their own: contiguous (4-wide and scalar), broadcast, strided.
// The GPU check also reruns this file and the op table with TCV_CUDA_WIDE_INDICES=1.
TEST(CudaElementwise, WideIndicesMatchTheCpu) {
  TCV_REQUIRE_CUDA();
  const testing::WideIndicesScope wide;
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1027}}) {
    for (DType dt : {DType::f32, DType::bf16}) {
      Tensor a = random_input({n}, 100 + n, dt), b = random_input({n}, 110 + n, dt);
      expect_cuda_matches_cpu(
          "wide add " + std::to_string(n), [](const TVec& v) { return ops::add(v[0], v[1]); },
          {a, b}, add_tol());
      expect_cuda_matches_cpu(
          "wide exp " + std::to_string(n), [](const TVec& v) { return ops::exp(v[0]); }, {a},
          kTranscendental);
    }
  }
  Tensor a = random_input({4, 1, 37}, 120), b = random_input({5, 37}, 121);
  expect_cuda_matches_cpu(
      "wide broadcast mul", [](const TVec& v) { return ops::mul(v[0], v[1]); }, {a, b}, mul_tol(5));
  Tensor t = random_input({37, 6}, 122), u = random_input({6, 37}, 123);
  Tensor c = random_input({6, 37}, 124, DType::f32, false);
  expect_cuda_matches_cpu(
      "wide transposed where",
      [](const TVec& v) { return ops::where(ops::gt(v[2], 0.0), v[0].t(), v[1]); }, {t, u, c},
      {.terms = 1, .sums = Sums::routed});
}

}  // namespace
}  // namespace tcv
