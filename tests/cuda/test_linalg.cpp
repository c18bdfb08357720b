// CPU-vs-CUDA checks of matmul and linear (cuBLAS, kernels/cuda/gemm.cu):
// 2-D, batched, broadcast batch dims, 1-D operands, transposed and sliced
// (strided, non-BLAS-ready) operands, odd sizes (37x53x19), k = 0 and m = 0,
// linear with and without bias on 2-D and 3-D inputs, outputs and gradients,
// in f32 (TF32 off, rtol 1e-4) and f64; f16/bf16 (GPU only) against the CPU's
// f32 product of the same rounded inputs (rtol 1e-2).
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "engine/ops/linalg.h"
#include "engine/rng.h"
#include "kernels/cuda/settings.h"
#include "support/cuda_compare.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using testing::CudaCompareOptions;
using testing::expect_cuda_matches_cpu;

const Device kGpu(DeviceType::CUDA, 0);

Tensor input(const Shape& shape, uint64_t seed, DType dt = DType::f32, bool grad = true) {
  Generator gen(seed);
  Tensor t = randn(shape, {.dtype = dt}, &gen);
  if (grad) t.set_requires_grad(true);
  return t;
}

CudaCompareOptions tol(DType dt) {
  CudaCompareOptions o;
  if (dt == DType::f64) {
    o.atol = 1e-10;
    o.rtol = 1e-10;
  } else {
    o.atol = 1e-4;
    o.rtol = 1e-4;
  }
  return o;
}

class CudaLinalg : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    TCV_REQUIRE_CUDA();
    kernels::cuda::set_allow_tf32(false);
  }
};

TEST_P(CudaLinalg, Matmul2D) {
  const DType dt = GetParam();
  auto mm = [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); };
  expect_cuda_matches_cpu("matmul 16x32x8", mm, {input({16, 32}, 1, dt), input({32, 8}, 2, dt)},
                          tol(dt));
  expect_cuda_matches_cpu("matmul 37x53x19", mm, {input({37, 53}, 3, dt), input({53, 19}, 4, dt)},
                          tol(dt));
  expect_cuda_matches_cpu("matmul 1x7x1", mm, {input({1, 7}, 5, dt), input({7, 1}, 6, dt)},
                          tol(dt));
}

TEST_P(CudaLinalg, Matmul1D) {
  const DType dt = GetParam();
  auto mm = [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); };
  expect_cuda_matches_cpu("vec·mat", mm, {input({13}, 1, dt), input({13, 5}, 2, dt)}, tol(dt));
  expect_cuda_matches_cpu("mat·vec", mm, {input({6, 13}, 3, dt), input({13}, 4, dt)}, tol(dt));
  expect_cuda_matches_cpu("vec·vec", mm, {input({13}, 5, dt), input({13}, 6, dt)}, tol(dt));
  expect_cuda_matches_cpu("batched·vec", mm, {input({3, 6, 13}, 7, dt), input({13}, 8, dt)},
                          tol(dt));
}

TEST_P(CudaLinalg, MatmulBatched) {
  const DType dt = GetParam();
  auto mm = [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); };
  expect_cuda_matches_cpu("batched 4x37x53x19", mm,
                          {input({4, 37, 53}, 1, dt), input({4, 53, 19}, 2, dt)}, tol(dt));
  expect_cuda_matches_cpu("batched 2x3 dims", mm,
                          {input({2, 3, 5, 7}, 3, dt), input({2, 3, 7, 4}, 4, dt)}, tol(dt));
}

TEST_P(CudaLinalg, MatmulBroadcastBatch) {
  const DType dt = GetParam();
  auto mm = [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); };
  // A weight shared by the batch (folded into one GEMM's rows).
  expect_cuda_matches_cpu("batch x 2-D", mm, {input({5, 9, 11}, 1, dt), input({11, 6}, 2, dt)},
                          tol(dt));
  // 2-D times batch: a broadcast with stride 0.
  expect_cuda_matches_cpu("2-D x batch", mm, {input({9, 11}, 3, dt), input({5, 11, 6}, 4, dt)},
                          tol(dt));
  // Size-1 batch dims broadcast against each other.
  expect_cuda_matches_cpu("(3,1) x (1,4)", mm,
                          {input({3, 1, 7, 5}, 5, dt), input({1, 4, 5, 8}, 6, dt)}, tol(dt));
}

TEST_P(CudaLinalg, MatmulStridedOperands) {
  const DType dt = GetParam();
  // Transposed views go to cuBLAS as transpose flags.
  expect_cuda_matches_cpu(
      "aᵀ·bᵀ", [](const std::vector<Tensor>& in) { return ops::matmul(in[0].t(), in[1].t()); },
      {input({53, 37}, 1, dt), input({19, 53}, 2, dt)}, tol(dt));
  expect_cuda_matches_cpu(
      "batched transposed",
      [](const std::vector<Tensor>& in) {
        return ops::matmul(in[0].transpose(-1, -2), in[1].transpose(0, 1));
      },
      {input({3, 10, 7}, 3, dt), input({10, 3, 8}, 4, dt)}, tol(dt));
  // Column slices keep a leading dimension larger than the row.
  expect_cuda_matches_cpu(
      "sliced columns",
      [](const std::vector<Tensor>& in) {
        return ops::matmul(in[0].slice(1, 2, 15), in[1].slice(1, 1, 10));
      },
      {input({11, 20}, 5, dt), input({13, 12}, 6, dt)}, tol(dt));
  // A step-2 slice has no unit stride: it is made contiguous first.
  expect_cuda_matches_cpu(
      "step-2 slice",
      [](const std::vector<Tensor>& in) { return ops::matmul(in[0].slice(1, 0, 26, 2), in[1]); },
      {input({9, 26}, 7, dt), input({13, 5}, 8, dt)}, tol(dt));
  // Permuted batch dims (non-contiguous batch strides).
  expect_cuda_matches_cpu(
      "permuted batch",
      [](const std::vector<Tensor>& in) {
        return ops::matmul(in[0].permute({1, 0, 2, 3}), in[1]);
      },
      {input({3, 2, 6, 5}, 9, dt), input({2, 3, 5, 4}, 10, dt)}, tol(dt));
}

TEST_P(CudaLinalg, MatmulEmpty) {
  const DType dt = GetParam();
  auto mm = [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); };
  expect_cuda_matches_cpu("k = 0", mm, {input({4, 0}, 1, dt), input({0, 3}, 2, dt)}, tol(dt));
  expect_cuda_matches_cpu("m = 0", mm, {input({0, 5}, 3, dt), input({5, 3}, 4, dt)}, tol(dt));
}

TEST_P(CudaLinalg, Linear) {
  const DType dt = GetParam();
  auto lin = [](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1], in[2]); };
  auto lin_nb = [](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1]); };
  expect_cuda_matches_cpu("linear bias 2-D", lin,
                          {input({37, 53}, 1, dt), input({19, 53}, 2, dt), input({19}, 3, dt)},
                          tol(dt));
  expect_cuda_matches_cpu("linear bias 3-D", lin,
                          {input({4, 7, 13}, 4, dt), input({6, 13}, 5, dt), input({6}, 6, dt)},
                          tol(dt));
  expect_cuda_matches_cpu("linear no bias", lin_nb,
                          {input({5, 7, 13}, 7, dt), input({9, 13}, 8, dt)}, tol(dt));
  expect_cuda_matches_cpu("linear 1-D input", lin,
                          {input({13}, 9, dt), input({9, 13}, 10, dt), input({9}, 11, dt)},
                          tol(dt));
  expect_cuda_matches_cpu(
      "linear transposed input",
      [](const std::vector<Tensor>& in) { return ops::linear(in[0].t(), in[1], in[2]); },
      {input({13, 10}, 12, dt), input({9, 13}, 13, dt), input({9}, 14, dt)}, tol(dt));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaLinalg, ::testing::Values(DType::f32, DType::f64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// 16-bit: the CPU has no 16-bit GEMM, so the reference is the CPU's f32 product
// of the same (rounded) inputs; the GPU accumulates in f32 and rounds once.
class CudaLinalgHalf : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { TCV_REQUIRE_CUDA(); }
};

void expect_half_matches(const std::string& name, const Tensor& gpu_out, const Tensor& cpu_f32) {
  ASSERT_TRUE(gpu_out.device().is_cuda()) << name;
  testing::expect_close(gpu_out.to(kCPU).to(DType::f32), cpu_f32, 2e-2, 1e-2, name);
}

TEST_P(CudaLinalgHalf, MatmulAndLinear) {
  const DType dt = GetParam();
  struct Case {
    const char* name;
    Shape a, b;
  };
  for (const Case& c :
       {Case{"37x53x19", {37, 53}, {53, 19}}, Case{"batched", {3, 9, 16}, {3, 16, 5}},
        Case{"broadcast", {4, 9, 16}, {16, 5}}}) {
    // Inputs rounded to the 16-bit type first, so both sides multiply the same numbers.
    Tensor a16 = input(c.a, 1, DType::f32, false).to(dt),
           b16 = input(c.b, 2, DType::f32, false).to(dt);
    Tensor ref = ops::matmul(a16.to(DType::f32), b16.to(DType::f32));
    Tensor out = ops::matmul(a16.to(kGpu), b16.to(kGpu));
    EXPECT_EQ(out.dtype(), dt);
    expect_half_matches(std::string("matmul ") + c.name, out, ref);
  }
  // Transposed operand.
  {
    Tensor a16 = input({16, 9}, 3, DType::f32, false).to(dt),
           b16 = input({16, 7}, 4, DType::f32, false).to(dt);
    Tensor ref = ops::matmul(a16.to(DType::f32).t(), b16.to(DType::f32));
    expect_half_matches("matmul aᵀ", ops::matmul(a16.to(kGpu).t(), b16.to(kGpu)), ref);
  }
  // linear with bias, forward and gradients.
  Tensor x16 = input({6, 5, 24}, 5, DType::f32, false).to(dt);
  Tensor w16 = input({10, 24}, 6, DType::f32, false).to(dt);
  Tensor b16 = input({10}, 7, DType::f32, false).to(dt);
  Tensor xr = x16.to(DType::f32).set_requires_grad(true);
  Tensor wr = w16.to(DType::f32).set_requires_grad(true);
  Tensor br = b16.to(DType::f32).set_requires_grad(true);
  Tensor yr = ops::linear(xr, wr, br);
  Tensor xg = x16.to(kGpu).set_requires_grad(true);
  Tensor wg = w16.to(kGpu).set_requires_grad(true);
  Tensor bg = b16.to(kGpu).set_requires_grad(true);
  Tensor yg = ops::linear(xg, wg, bg);
  expect_half_matches("linear", yg, yr);
  Generator gen(9);
  Tensor dy16 = uniform(yr.shape(), -1.0, 1.0, {}, &gen).to(dt);
  yr.backward(dy16.to(DType::f32));
  yg.backward(dy16.to(kGpu));
  expect_half_matches("linear dx", xg.grad(), xr.grad());
  expect_half_matches("linear dweight", wg.grad(), wr.grad());
  expect_half_matches("linear dbias", bg.grad(), br.grad());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaLinalgHalf, ::testing::Values(DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// TF32 on: still close to f32 at a looser tolerance, and the switch restores.
TEST(CudaLinalgTf32, MatmulWithTf32) {
  TCV_REQUIRE_CUDA();
  kernels::cuda::set_allow_tf32(true);
  CudaCompareOptions o;
  o.atol = 5e-2;
  o.rtol = 5e-2;
  expect_cuda_matches_cpu(
      "matmul tf32", [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); },
      {input({64, 96}, 1), input({96, 32}, 2)}, o);
  kernels::cuda::set_allow_tf32(false);
}

}  // namespace
}  // namespace tcv
