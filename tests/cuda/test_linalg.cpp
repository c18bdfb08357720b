// matmul on CUDA (cuBLAS) beyond the op table's cases (tests/ops/cases_linalg.cpp):
// with TF32 allowed, and the switch restores.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/ops.h"
#include "kernels/cuda/settings.h"
#include "support/cuda_compare.h"
#include "support/error_bound.h"

namespace tcv {
namespace {

TEST(CudaLinalgTf32, MatmulWithTf32) {
  TCV_REQUIRE_CUDA();
  kernels::cuda::set_allow_tf32(true);
  // cuBLAS rounds each f32 operand to 10 mantissa bits (u = 2^-11): every
  // product within 2^-10 relative, on top of f32's bound for sums of 96 terms.
  // The gradients sum 96 (dA) and 64 (dB) products.
  const int64_t terms = 96 + 2;
  const double g = testing::gamma_n(terms, DType::f32);
  testing::expect_cuda_matches_cpu(
      "matmul tf32", [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); },
      {testing::random_input({64, 96}, 1, DType::f32, true, -1, 1),
       testing::random_input({96, 32}, 2, DType::f32, true, -1, 1)},
      {.ulps = 1, .terms = terms, .growth = (g + std::ldexp(1.0, -10)) / g});
  kernels::cuda::set_allow_tf32(false);
  EXPECT_FALSE(kernels::cuda::get_allow_tf32());
}

}  // namespace
}  // namespace tcv
