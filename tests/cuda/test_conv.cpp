// conv2d on CUDA (cuDNN) beyond the op table's cases (tests/ops/cases_conv.cpp):
// ResNet-sized layers, where cuDNN picks its real algorithms (Winograd,
// implicit GEMM variants), in f32, bf16 and f32 with TF32 allowed, and the
// algorithm cache with cudnn benchmark on and off.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/ops.h"
#include "kernels/cuda/conv.h"
#include "kernels/cuda/settings.h"
#include "support/cuda_compare.h"
#include "support/error_bound.h"
#include "support/op_bounds.h"

namespace tcv {
namespace {

using namespace testing;
using TVec = std::vector<Tensor>;

struct Layer {
  const char* name;
  Shape x;  // (N, C, H, W)
  Shape w;  // (K, C/groups, R, S)
  bool bias;
  ops::Conv2dParams p;
};

TVec inputs(const Layer& l, uint64_t seed, DType dt) {
  return {testing::random_input(l.x, seed, dt, true, -1, 1),
          testing::random_input(l.w, seed + 1, dt, true, -1, 1),
          testing::random_input({l.w[0]}, seed + 2, dt, true, -1, 1)};
}

void compare(const std::string& name, const Layer& l, const TVec& in, const Tol& tol) {
  expect_cuda_matches_cpu(
      name, [l](const TVec& v) { return ops::conv2d(v[0], v[1], l.bias ? v[2] : Tensor(), l.p); },
      l.bias ? in : TVec{in[0], in[1]}, tol, {.cpu16 = testing::Cpu16::via_f32});
}

TEST(CudaConv, ResNetSizedLayers) {
  TCV_REQUIRE_CUDA();
  const std::vector<Layer> big = {
      {"3x3_64", {4, 64, 28, 28}, {64, 64, 3, 3}, false, {.padding = {1, 1}}},
      {"1x1_s2_128", {4, 64, 28, 28}, {128, 64, 1, 1}, true, {.stride = {2, 2}}},
      {"depthwise_96", {2, 96, 29, 29}, {96, 1, 3, 3}, true, {.padding = {1, 1}, .groups = 96}},
  };
  kernels::cuda::set_allow_tf32(false);
  for (DType dt : {DType::f32, DType::bf16})
    for (const Layer& l : big)
      compare(std::string(l.name) + " " + dtype_name(dt), l, inputs(l, 16, dt),
              testing::conv2d_tol(l.x, l.w, l.p));
  // TF32 on: cuDNN rounds each f32 operand to 10 mantissa bits (u = 2^-11),
  // so every product is within 2^-10 relative on top of f32's sum bound.
  kernels::cuda::set_allow_tf32(true);
  for (const Layer& l : big) {
    Tol tol = testing::conv2d_tol(l.x, l.w, l.p);
    const double g = testing::gamma_n(tol.terms, DType::f32);
    tol.growth *= (g + std::ldexp(1.0, -10)) / g;
    compare(std::string(l.name) + " tf32", l, inputs(l, 19, DType::f32), tol);
  }
  kernels::cuda::set_allow_tf32(false);
}

TEST(CudaConv, AlgorithmCacheBenchmarkOnAndOff) {
  TCV_REQUIRE_CUDA();
  const bool saved = kernels::cuda::get_cudnn_benchmark();
  const Layer l = {
      "dilation2", {3, 4, 11, 10}, {5, 4, 3, 3}, true, {.padding = {2, 2}, .dilation = {2, 2}}};
  const Tol tol = testing::conv2d_tol(l.x, l.w, l.p);
  for (bool bench : {true, false}) {
    kernels::cuda::set_cudnn_benchmark(bench);
    const TVec in = inputs(l, 13, DType::f32);
    compare(std::string("benchmark ") + (bench ? "on" : "off"), l, in, tol);
    // A second call with the same configuration reuses the cached entry.
    const size_t before = kernels::cuda::conv2d_cache_size();
    compare("repeat", l, in, tol);
    EXPECT_EQ(kernels::cuda::conv2d_cache_size(), before);
  }
  kernels::cuda::set_cudnn_benchmark(saved);
}

}  // namespace
}  // namespace tcv
