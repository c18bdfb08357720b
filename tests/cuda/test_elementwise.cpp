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

}  // namespace
}  // namespace tcv
