// conv2d on CUDA (cuDNN) against the CPU: 1x1, 3x3 stride 2 pad 1, 7x7 stride 2
// pad 3, dilation 2, groups 2, depthwise (also with a channel multiplier), with
// and without bias, odd spatial sizes, batch 1 and 3; f32 (TF32 off), f64, and
// f16/bf16 (the CPU computes those in f32 and rounds); every gradient, each
// gradient alone (dx only, dweight only), non-contiguous input, empty batch,
// ResNet-sized layers (f32, bf16, and f32 with TF32 allowed), and the
// algorithm cache with cudnn benchmark on and off; conv2d_relu (the CPU's
// fused ReLU post-op) against conv2d then relu on CUDA.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "engine/rng.h"
#include "kernels/cuda/conv.h"
#include "kernels/cuda/settings.h"
#include "support/cuda_compare.h"

namespace tcv {
namespace {

using testing::CudaCompareOptions;
using testing::expect_cuda_matches_cpu;
using TVec = std::vector<Tensor>;

struct Case {
  const char* name;
  Shape x;  // (N, C, H, W)
  Shape w;  // (K, C/groups, R, S)
  bool bias;
  ops::Conv2dParams p;
};

std::vector<Case> cases() {
  return {
      {"1x1", {3, 5, 7, 9}, {7, 5, 1, 1}, true, {}},
      {"3x3_s2_p1", {3, 6, 13, 11}, {8, 6, 3, 3}, true, {.stride = {2, 2}, .padding = {1, 1}}},
      {"7x7_s2_p3", {1, 3, 23, 21}, {8, 3, 7, 7}, true, {.stride = {2, 2}, .padding = {3, 3}}},
      {"dilation2", {3, 4, 11, 10}, {5, 4, 3, 3}, true, {.padding = {2, 2}, .dilation = {2, 2}}},
      {"groups2", {3, 4, 9, 9}, {6, 2, 3, 3}, true, {.padding = {1, 1}, .groups = 2}},
      {"depthwise", {3, 8, 15, 15}, {8, 1, 3, 3}, true, {.padding = {1, 1}, .groups = 8}},
      {"depthwise_mult2_s2",
       {1, 3, 10, 9},
       {6, 1, 3, 3},
       false,
       {.stride = {2, 2}, .padding = {1, 1}, .groups = 3}},
      {"no_bias_3x3", {1, 3, 5, 5}, {2, 3, 3, 3}, false, {.padding = {1, 1}}},
      {"odd_5x3_asym", {3, 2, 9, 6}, {3, 2, 5, 3}, true, {.stride = {2, 3}, .padding = {2, 0}}},
  };
}

Tensor input(const Shape& shape, uint64_t seed, DType dt, bool grad = true) {
  return testing::random_input(shape, seed, dt, grad, -1.0, 1.0);
}

CudaCompareOptions tol_for(DType dt) {
  CudaCompareOptions o;
  if (dt == DType::f32) {
    o.rtol = 1e-4;
    o.atol = 1e-4;
  } else if (dt == DType::f64) {
    o.rtol = 1e-10;
    o.atol = 1e-10;
  } else {
    o.rtol = 2e-2;
    o.atol = 5e-2;
  }
  return o;
}

/// conv2d on the CUDA inputs as they are; on the CPU, 16-bit inputs go through
/// f32 (the CPU kernels take f32/f64) and the result is rounded back.
Tensor run_conv(const Case& c, const TVec& v) {
  const DType dt = v[0].dtype();
  const bool up = v[0].device().is_cpu() && (dt == DType::f16 || dt == DType::bf16);
  auto prep = [&](const Tensor& t) { return up ? t.to(DType::f32) : t; };
  Tensor y = ops::conv2d(prep(v[0]), prep(v[1]), c.bias ? prep(v[2]) : Tensor(), c.p);
  return up ? y.to(dt) : y;
}

void run_cases(DType dt) {
  for (const Case& c : cases()) {
    const int64_t k = c.w[0];
    TVec in = {input(c.x, 1, dt), input(c.w, 2, dt), input({k}, 3, dt)};
    expect_cuda_matches_cpu(
        std::string(c.name) + " " + dtype_name(dt), [&c](const TVec& v) { return run_conv(c, v); },
        in, tol_for(dt));
  }
}

TEST(CudaConv, F32AllGeometries) {
  TCV_REQUIRE_CUDA();
  kernels::cuda::set_allow_tf32(false);
  run_cases(DType::f32);
}

TEST(CudaConv, F64AllGeometries) {
  TCV_REQUIRE_CUDA();
  run_cases(DType::f64);
}

TEST(CudaConv, Bf16AndF16AllGeometries) {
  TCV_REQUIRE_CUDA();
  run_cases(DType::bf16);
  run_cases(DType::f16);
}

TEST(CudaConv, ReluFusedMatchesCpu) {
  // conv2d_relu: one oneDNN pass with a ReLU post-op on the CPU, cuDNN then
  // relu on CUDA; values and every gradient (dy masked by the output).
  TCV_REQUIRE_CUDA();
  kernels::cuda::set_allow_tf32(false);
  for (DType dt : {DType::f32, DType::f64})
    for (const Case& c : cases()) {
      TVec in = {input(c.x, 7, dt), input(c.w, 8, dt), input({c.w[0]}, 9, dt)};
      expect_cuda_matches_cpu(
          std::string("conv2d_relu ") + c.name + " " + dtype_name(dt),
          [&c](const TVec& v) {
            return ops::conv2d_relu(v[0], v[1], c.bias ? v[2] : Tensor(), c.p);
          },
          in, tol_for(dt));
    }
}

TEST(CudaConv, SingleGradients) {
  TCV_REQUIRE_CUDA();
  const Case c = cases()[1];
  // Only dx (weight frozen), then only dweight and dbias (input frozen).
  TVec only_dx = {input(c.x, 4, DType::f32), input(c.w, 5, DType::f32, false),
                  input({c.w[0]}, 6, DType::f32, false)};
  expect_cuda_matches_cpu(
      "dx only", [&c](const TVec& v) { return run_conv(c, v); }, only_dx, tol_for(DType::f32));
  TVec only_dw = {input(c.x, 4, DType::f32, false), input(c.w, 5, DType::f32),
                  input({c.w[0]}, 6, DType::f32)};
  expect_cuda_matches_cpu(
      "dweight only", [&c](const TVec& v) { return run_conv(c, v); }, only_dw, tol_for(DType::f32));
}

TEST(CudaConv, NonContiguousInputAndEmptyBatch) {
  TCV_REQUIRE_CUDA();
  const Case c = {"t", {2, 3, 9, 7}, {4, 3, 3, 3}, true, {.padding = {1, 1}}};
  // x is a transposed view: (2, 3, 7, 9) -> (2, 3, 9, 7).
  Tensor base = input({2, 3, 7, 9}, 7, DType::f32, false);
  TVec in = {base, input(c.w, 8, DType::f32), input({4}, 9, DType::f32)};
  in[0].set_requires_grad(true);
  expect_cuda_matches_cpu(
      "transposed input",
      [&c](const TVec& v) {
        return run_conv(c, {v[0].transpose(2, 3), v[1], v[2]});
      },
      in, tol_for(DType::f32));
  TVec empty_in = {input({0, 3, 9, 7}, 10, DType::f32), input(c.w, 11, DType::f32),
                   input({4}, 12, DType::f32)};
  expect_cuda_matches_cpu(
      "empty batch", [&c](const TVec& v) { return run_conv(c, v); }, empty_in, tol_for(DType::f32));
}

TEST(CudaConv, ResNetSizedLayers) {
  TCV_REQUIRE_CUDA();
  // Sizes where cuDNN picks its real algorithms (Winograd, implicit GEMM variants).
  const std::vector<Case> big = {
      {"3x3_64", {4, 64, 28, 28}, {64, 64, 3, 3}, false, {.padding = {1, 1}}},
      {"1x1_s2_128", {4, 64, 28, 28}, {128, 64, 1, 1}, true, {.stride = {2, 2}}},
      {"depthwise_96", {2, 96, 29, 29}, {96, 1, 3, 3}, true, {.padding = {1, 1}, .groups = 96}},
  };
  kernels::cuda::set_allow_tf32(false);
  for (DType dt : {DType::f32, DType::bf16}) {
    CudaCompareOptions o = tol_for(dt);
    if (dt == DType::f32) o.atol = 1e-3;  // sums of up to 3136 products
    for (const Case& c : big) {
      TVec in = {input(c.x, 16, dt), input(c.w, 17, dt), input({c.w[0]}, 18, dt)};
      expect_cuda_matches_cpu(
          std::string(c.name) + " " + dtype_name(dt),
          [&c](const TVec& v) { return run_conv(c, v); }, in, o);
    }
  }
  // TF32 on: f32 inputs rounded to 10-bit mantissas inside cuDNN.
  kernels::cuda::set_allow_tf32(true);
  CudaCompareOptions o;
  o.rtol = 1e-2;
  o.atol = 1e-1;
  for (const Case& c : big) {
    TVec in = {input(c.x, 19, DType::f32), input(c.w, 20, DType::f32),
               input({c.w[0]}, 21, DType::f32)};
    expect_cuda_matches_cpu(
        std::string(c.name) + " tf32", [&c](const TVec& v) { return run_conv(c, v); }, in, o);
  }
  kernels::cuda::set_allow_tf32(false);
}

TEST(CudaConv, AlgorithmCacheBenchmarkOnAndOff) {
  TCV_REQUIRE_CUDA();
  const bool saved = kernels::cuda::get_cudnn_benchmark();
  const Case c = cases()[3];
  for (bool bench : {true, false}) {
    kernels::cuda::set_cudnn_benchmark(bench);
    TVec in = {input(c.x, 13, DType::f32), input(c.w, 14, DType::f32),
               input({c.w[0]}, 15, DType::f32)};
    expect_cuda_matches_cpu(
        std::string("benchmark ") + (bench ? "on" : "off"),
        [&c](const TVec& v) { return run_conv(c, v); }, in, tol_for(DType::f32));
    // A second call with the same configuration reuses the cached entry.
    const size_t before = kernels::cuda::conv2d_cache_size();
    expect_cuda_matches_cpu(
        "repeat", [&c](const TVec& v) { return run_conv(c, v); }, in, tol_for(DType::f32));
    EXPECT_EQ(kernels::cuda::conv2d_cache_size(), before);
  }
  kernels::cuda::set_cudnn_benchmark(saved);
}

}  // namespace
}  // namespace tcv
