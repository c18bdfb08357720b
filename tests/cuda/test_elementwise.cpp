// Elementwise ops on CUDA against the CPU: every binary and unary op with
// broadcasting, strided views, type promotion, the 16-bit floats, where,
// fill and in-place arithmetic, gradients included.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "engine/rng.h"
#include "support/cuda_compare.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::CudaCompareOptions;
using testing::expect_cuda_matches_cpu;
using TVec = std::vector<Tensor>;

Tensor input(const Shape& shape, uint64_t seed, DType dt = DType::f32, bool grad = true,
             double lo = -2.0, double hi = 2.0) {
  return testing::random_input(shape, seed, dt, grad, lo, hi);
}

CudaCompareOptions tol_for(DType dt) {
  CudaCompareOptions o;
  if (dt == DType::f16 || dt == DType::bf16) {
    o.rtol = 1e-2;
    o.atol = 1e-2;
  } else if (dt == DType::f64) {
    o.rtol = 1e-12;
    o.atol = 1e-12;
  }
  return o;
}

TEST(CudaElementwise, BinaryOpsWithBroadcast) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    const auto o = tol_for(dt);
    Tensor a = input({4, 1, 37}, 1, dt), b = input({5, 37}, 2, dt);
    expect_cuda_matches_cpu(
        "add", [](const TVec& v) { return ops::add(v[0], v[1]); }, {a, b}, o);
    expect_cuda_matches_cpu(
        "sub", [](const TVec& v) { return ops::sub(v[0], v[1]); }, {a, b}, o);
    expect_cuda_matches_cpu(
        "mul", [](const TVec& v) { return ops::mul(v[0], v[1]); }, {a, b}, o);
    Tensor pos = input({5, 37}, 3, dt, true, 0.5, 2.0);
    expect_cuda_matches_cpu(
        "div", [](const TVec& v) { return ops::div(v[0], v[1]); }, {a, pos}, o);
    expect_cuda_matches_cpu(
        "pow", [](const TVec& v) { return ops::pow(v[0], v[1]); },
        {input({4, 1, 37}, 4, dt, true, 0.5, 2.0), b}, o);
    expect_cuda_matches_cpu(
        "maximum", [](const TVec& v) { return ops::maximum(v[0], v[1]); }, {a, b}, o);
    expect_cuda_matches_cpu(
        "minimum", [](const TVec& v) { return ops::minimum(v[0], v[1]); }, {a, b}, o);
    expect_cuda_matches_cpu(
        "add_relu", [](const TVec& v) { return ops::add_relu(v[0], v[1]); }, {a, b}, o);
  }
}

TEST(CudaElementwise, ComparisonsAndIntegers) {
  TCV_REQUIRE_CUDA();
  Tensor a = input({3, 50}, 5, DType::f32, false), b = input({50}, 6, DType::f32, false);
  for (auto* name : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    const std::string n = name;
    expect_cuda_matches_cpu(n,
                            [n](const TVec& v) {
                              if (n == "eq") return ops::eq(v[0], v[0]);
                              if (n == "ne") return ops::ne(v[0], v[1]);
                              if (n == "lt") return ops::lt(v[0], v[1]);
                              if (n == "le") return ops::le(v[0], v[1]);
                              if (n == "gt") return ops::gt(v[0], v[1]);
                              return ops::ge(v[0], v[1]);
                            },
                            {a, b});
  }
  // Integer operands where every relation occurs (row 0 below, row 1 equal, rows 2-3 above):
  // random floats are never equal, so the f32 comparisons above cannot tell eq from le or ge.
  Tensor ci = testing::iota({4, 9}, DType::i64, -18), cj = testing::iota({9}, DType::i64, -9);
  for (auto* name : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    const std::string n = name;
    expect_cuda_matches_cpu("int " + n,
                            [n](const TVec& v) {
                              if (n == "eq") return ops::eq(v[0], v[1]);
                              if (n == "ne") return ops::ne(v[0], v[1]);
                              if (n == "lt") return ops::lt(v[0], v[1]);
                              if (n == "le") return ops::le(v[0], v[1]);
                              if (n == "gt") return ops::gt(v[0], v[1]);
                              return ops::ge(v[0], v[1]);
                            },
                            {ci, cj});
  }
  Tensor i = testing::iota({4, 9}, DType::i64, -10), j = testing::iota({9}, DType::i32, -4);
  expect_cuda_matches_cpu("int add", [](const TVec& v) { return ops::add(v[0], v[1]); }, {i, j});
  expect_cuda_matches_cpu("int mul", [](const TVec& v) { return ops::mul(v[0], v[1]); }, {i, j});
  expect_cuda_matches_cpu("int div -> f32", [](const TVec& v) { return ops::div(v[0], v[1]); },
                          {i, j});
  expect_cuda_matches_cpu("mixed i64 + f32", [](const TVec& v) { return ops::add(v[0], v[1]); },
                          {i, input({9}, 7, DType::f32, false)});
}

TEST(CudaElementwise, UnaryOpsAndGradients) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    const auto o = tol_for(dt);
    Tensor x = input({7, 33}, 8, dt);
    Tensor pos = input({7, 33}, 9, dt, true, 0.2, 3.0);
    using F = Tensor (*)(const Tensor&);
    const std::pair<const char*, F> any[] = {{"neg", ops::neg},   {"abs", ops::abs},
                                             {"exp", ops::exp},   {"square", ops::square},
                                             {"relu", ops::relu}, {"sigmoid", ops::sigmoid},
                                             {"tanh", ops::tanh}, {"hardswish", ops::hardswish}};
    for (auto [name, f] : any)
      expect_cuda_matches_cpu(
          name, [f](const TVec& v) { return f(v[0]); }, {x}, o);
    const std::pair<const char*, F> positive[] = {
        {"log", ops::log}, {"sqrt", ops::sqrt}, {"rsqrt", ops::rsqrt}};
    for (auto [name, f] : positive)
      expect_cuda_matches_cpu(
          name, [f](const TVec& v) { return f(v[0]); }, {pos}, o);
    expect_cuda_matches_cpu(
        "leaky_relu", [](const TVec& v) { return ops::leaky_relu(v[0], 0.1); }, {x}, o);
    expect_cuda_matches_cpu(
        "clamp", [](const TVec& v) { return ops::clamp(v[0], -0.5, 0.75); }, {x}, o);
    expect_cuda_matches_cpu(
        "sign", [](const TVec& v) { return ops::sign(v[0]); }, {x}, o);
    // relu6 over both bounds: inputs in (-4, 8).
    expect_cuda_matches_cpu(
        "relu6", [](const TVec& v) { return ops::relu6(v[0]); },
        {input({7, 33}, 10, dt, true, -4.0, 8.0)}, o);
  }
}

TEST(CudaElementwise, StridedViewsAndChains) {
  TCV_REQUIRE_CUDA();
  Tensor a = input({6, 8, 10}, 10), b = input({10, 8}, 11);
  expect_cuda_matches_cpu(
      "transposed operands",
      [](const TVec& v) {
        Tensor x = v[0].permute({2, 0, 1}).slice(1, 1, 6, 2);  // (10, 3, 8), strided
        return ops::mul(ops::add(x, v[1].unsqueeze(1)), ops::sigmoid(x));
      },
      {a, b});
  expect_cuda_matches_cpu("scalar ops",
                          [](const TVec& v) { return ops::add(ops::mul(v[0], 2.5), 1.0); }, {a});
}

TEST(CudaElementwise, WhereFillAndInPlace) {
  TCV_REQUIRE_CUDA();
  Tensor a = input({5, 6}, 12), b = input({6}, 13), c = input({5, 6}, 14, DType::f32, false);
  expect_cuda_matches_cpu(
      "where", [](const TVec& v) { return ops::where(ops::gt(v[2], 0.0), v[0], v[1]); }, {a, b, c});
  expect_cuda_matches_cpu("in place add_/mul_/fill_",
                          [](const TVec& v) {
                            Tensor t = v[0].detach().clone();
                            t.add_(v[1].detach(), 0.5);
                            t.mul_(v[1].detach());
                            t.slice(0, 0, 2).fill_(7.0);
                            return t;
                          },
                          {c, input({6}, 15, DType::f32, false)});
  expect_cuda_matches_cpu("empty", [](const TVec& v) { return ops::exp(v[0]); },
                          {input({0, 4}, 16)});
}

TEST(CudaElementwise, LargeTensor) {
  TCV_REQUIRE_CUDA();
  Tensor a = input({(1 << 22) + 3}, 17, DType::f32, false);
  expect_cuda_matches_cpu("large relu", [](const TVec& v) { return ops::relu(v[0]); }, {a});
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
      const auto o = tol_for(dt);
      Tensor a = input({n}, 20 + n, dt), b = input({n}, 40 + n, dt);
      expect_cuda_matches_cpu(
          "add", [](const TVec& v) { return ops::add(v[0], v[1]); }, {a, b}, o);
      expect_cuda_matches_cpu(
          "exp", [](const TVec& v) { return ops::exp(v[0]); }, {a}, o);
    }
    Tensor x = input({n}, 60 + n), y = input({n}, 80 + n), c = input({n}, 90 + n);
    expect_cuda_matches_cpu("mul", [](const TVec& v) { return ops::mul(v[0], v[1]); }, {x, y});
    expect_cuda_matches_cpu(
        "where", [](const TVec& v) { return ops::where(ops::gt(v[2], 0.0), v[0], v[1]); },
        {x, y, c});
    Tensor i = testing::iota({n}, DType::i64, -7), j = testing::iota({n}, DType::i32, 3);
    expect_cuda_matches_cpu("int add", [](const TVec& v) { return ops::add(v[0], v[1]); }, {i, j});
  }
}

TEST(CudaElementwise, MisalignedOperandsFallBack) {
  TCV_REQUIRE_CUDA();
  // Views starting s elements in: s = 1, 2, 3 break the vector alignment of
  // f32 (16 bytes), s = 4 keeps it; for f16 (8 bytes) s = 2 breaks it too.
  for (int64_t n : {3, 4, 5, 8, 1023, 1024}) {
    for (int64_t s : {1, 2, 3, 4}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", start = " + std::to_string(s));
      Tensor a = input({n + 4}, 100 + n, DType::f32), b = input({n + 4}, 110 + n, DType::f32);
      expect_cuda_matches_cpu(
          "first input misaligned",
          [n, s](const TVec& v) { return ops::add(v[0].slice(0, s, s + n), v[1].slice(0, 0, n)); },
          {a, b});
      expect_cuda_matches_cpu(
          "second input misaligned",
          [n, s](const TVec& v) { return ops::mul(v[0].slice(0, 0, n), v[1].slice(0, s, s + n)); },
          {a, b});
      expect_cuda_matches_cpu(
          "unary misaligned",
          [n, s](const TVec& v) { return ops::sigmoid(v[0].slice(0, s, s + n)); }, {a});
      expect_cuda_matches_cpu("output misaligned (in place)",
                              [n, s](const TVec& v) {
                                Tensor t = v[0].detach().clone();
                                t.slice(0, s, s + n).add_(v[1].detach().slice(0, 0, n), 0.5);
                                t.slice(0, s, s + n).mul_(v[1].detach().slice(0, 4, 4 + n));
                                return t;
                              },
                              {a, b});
      expect_cuda_matches_cpu(
          "bool out, misaligned f32 in",
          [n, s](const TVec& v) { return ops::lt(v[0].slice(0, s, s + n), v[1].slice(0, 0, n)); },
          {a, b});
      Tensor h = input({n + 4}, 120 + n, DType::f16), g = input({n + 4}, 130 + n, DType::f16);
      expect_cuda_matches_cpu(
          "f16 misaligned",
          [n, s](const TVec& v) { return ops::sub(v[0].slice(0, s, s + n), v[1].slice(0, 0, n)); },
          {h, g}, tol_for(DType::f16));
    }
  }
}

TEST(CudaElementwise, MixedTypesContiguous) {
  TCV_REQUIRE_CUDA();
  for (int64_t n : kTailLengths) {
    SCOPED_TRACE("n = " + std::to_string(n));
    Tensor a = input({n}, 140 + n, DType::f32, false), b = input({n}, 150 + n, DType::f32, false);
    expect_cuda_matches_cpu("ge -> bool", [](const TVec& v) { return ops::ge(v[0], v[1]); },
                            {a, b});
    Tensor hb = input({n}, 160 + n, DType::bf16, false);
    Tensor hc = input({n}, 170 + n, DType::bf16, false);
    expect_cuda_matches_cpu("bf16 gt -> bool", [](const TVec& v) { return ops::gt(v[0], v[1]); },
                            {hb, hc});
    expect_cuda_matches_cpu("f32 -> bf16", [](const TVec& v) { return v[0].to(DType::bf16); }, {a});
    expect_cuda_matches_cpu("bf16 -> f32", [](const TVec& v) { return v[0].to(DType::f32); }, {hb});
    expect_cuda_matches_cpu("f32 -> f16 -> f64",
                            [](const TVec& v) { return v[0].to(DType::f16).to(DType::f64); }, {a});
    expect_cuda_matches_cpu(
        "bool -> f32 (where)",
        [](const TVec& v) { return ops::where(ops::lt(v[0], v[1]), v[1], v[0]); }, {a, b});
    // A misaligned source: the cast falls back to the scalar loop.
    expect_cuda_matches_cpu("f32 view -> bf16",
                            [n](const TVec& v) { return v[0].slice(0, 1, n).to(DType::bf16); },
                            {a});
  }
}

TEST(CudaElementwise, BroadcastAndStridedOffsets) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
    const auto o = tol_for(dt);
    for (const Shape& s : {Shape{2, 3, 5, 7}, Shape{4, 16, 9, 9}, Shape{3, 5, 1, 6}}) {
      Tensor x = input(s, 200, dt), bias = input({1, s[1], 1, 1}, 201, dt);
      expect_cuda_matches_cpu(
          "bias add (N,C,H,W) + (1,C,1,1)", [](const TVec& v) { return ops::add(v[0], v[1]); },
          {x, bias}, o);
      expect_cuda_matches_cpu(
          "scale (1,C,1,1) * (N,C,H,W)", [](const TVec& v) { return ops::mul(v[1], v[0]); },
          {x, bias}, o);
    }
  }
  Tensor a = input({37, 19}, 210), b = input({19, 37}, 211);
  expect_cuda_matches_cpu("transposed operand",
                          [](const TVec& v) { return ops::add(v[0], v[1].t()); }, {a, b});
  expect_cuda_matches_cpu("transposed output shape",
                          [](const TVec& v) { return ops::sub(v[0].t(), v[1]); }, {a, b});
  Tensor c = input({6, 5, 4, 3}, 212), d = input({3, 1, 4, 1}, 213);  // (3, 4, 4, 6) out
  expect_cuda_matches_cpu("permuted and broadcast",
                          [](const TVec& v) {
                            return ops::mul(v[0].permute({3, 1, 2, 0}).slice(1, 1, 5), v[1]);
                          },
                          {c, d});
  Tensor m = input({7, 1, 9}, 214), r = input({7, 11, 1}, 215);
  expect_cuda_matches_cpu("outer broadcast", [](const TVec& v) { return ops::maximum(v[0], v[1]); },
                          {m, r});
  expect_cuda_matches_cpu(
      "where over broadcast",
      [](const TVec& v) { return ops::where(ops::gt(v[1], 0.0), v[0], v[1].t()); },
      {input({9, 9}, 216), input({9, 9}, 217)});
}

TEST(CudaElementwise, GridStrideIteratesMoreThanOnce) {
  TCV_REQUIRE_CUDA();
  // More elements than an H200's grid holds in one pass (132 SMs x 16 blocks
  // x 256 threads x 4 per vector = 2,162,688): every path loops.
  const int64_t n = 2 * 2162688 + 3;
  Tensor a = input({n}, 220, DType::f32, false), b = input({n}, 221, DType::f32, false);
  expect_cuda_matches_cpu("large vector add", [](const TVec& v) { return ops::add(v[0], v[1]); },
                          {a, b});
  expect_cuda_matches_cpu(
      "large misaligned add",
      [n](const TVec& v) { return ops::add(v[0].slice(0, 1, n), v[1].slice(0, 0, n - 1)); },
      {a, b});
  Tensor x = input({2, 64, 130, 140}, 222, DType::f32, false);
  Tensor bias = input({1, 64, 1, 1}, 223, DType::f32, false);
  expect_cuda_matches_cpu("large bias add", [](const TVec& v) { return ops::add(v[0], v[1]); },
                          {x, bias});
  expect_cuda_matches_cpu("large transposed",
                          [](const TVec& v) { return ops::mul(v[0].transpose(2, 3), 2.0); }, {x});
}

// The 64-bit index variants (WideDivmod), which tensors below 2^31 elements
// never reach on their own: contiguous (4-wide and scalar), broadcast, strided.
// The GPU check also reruns this whole file with TCV_CUDA_WIDE_INDICES=1.
TEST(CudaElementwise, WideIndicesMatchTheCpu) {
  TCV_REQUIRE_CUDA();
  const testing::WideIndicesScope wide;
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1027}}) {
    for (DType dt : {DType::f32, DType::bf16}) {
      Tensor a = input({n}, 100 + n, dt), b = input({n}, 110 + n, dt);
      expect_cuda_matches_cpu(
          "wide add " + std::to_string(n), [](const TVec& v) { return ops::add(v[0], v[1]); },
          {a, b}, tol_for(dt));
      expect_cuda_matches_cpu(
          "wide exp " + std::to_string(n), [](const TVec& v) { return ops::exp(v[0]); }, {a},
          tol_for(dt));
    }
  }
  Tensor a = input({4, 1, 37}, 120), b = input({5, 37}, 121);
  expect_cuda_matches_cpu("wide broadcast mul", [](const TVec& v) { return ops::mul(v[0], v[1]); },
                          {a, b});
  Tensor t = input({37, 6}, 122), u = input({6, 37}, 123), c = input({6, 37}, 124);
  expect_cuda_matches_cpu(
      "wide transposed where",
      [](const TVec& v) { return ops::where(ops::gt(v[2], 0.0), v[0].t(), v[1]); }, {t, u, c});
}

}  // namespace
}  // namespace tcv
