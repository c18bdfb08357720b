// CPU-vs-CUDA checks of the random number generators (kernels/cuda/rng.cu
// through engine/rng.cpp) and of dropout (fused kernel in
// engine/ops/dropout.cpp): with the same seed and generator state, CUDA
// rand/uniform/uniform_ are bit-identical to the CPU (f32, f64, f16, bf16),
// randn/normal/normal_ agree within 1e-6 (device log/cos may differ from the
// host's in the last ulp of a double), randint is identical (i64 and i32),
// the generator advances identically (the next draw, on either device, is
// equal), odd and empty sizes, the default generator; dropout masks, outputs
// and gradients equal the CPU's for f32/f64/f16, on contiguous and
// transposed inputs.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops/nn.h"
#include "engine/rng.h"
#include "support/cuda_compare.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

const Device kGpu(DeviceType::CUDA, 0);

// Bitwise equality after moving both to the CPU (same dtype and shape).
void expect_bitwise_equal(const Tensor& gpu, const Tensor& cpu, const std::string& what) {
  ASSERT_TRUE(gpu.device().is_cuda()) << what;
  ASSERT_EQ(gpu.dtype(), cpu.dtype()) << what;
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  Tensor g = gpu.to(kCPU).contiguous(), c = cpu.contiguous();
  const size_t nbytes = c.nbytes();
  if (nbytes == 0) return;
  const unsigned char* pg = static_cast<const unsigned char*>(g.data_ptr());
  const unsigned char* pc = static_cast<const unsigned char*>(c.data_ptr());
  const size_t es = c.element_size();
  for (size_t i = 0; i < nbytes; i += es) {
    if (std::memcmp(pg + i, pc + i, es) != 0) {
      ADD_FAILURE() << what << ": element " << i / es << " differs: gpu "
                    << g.flatten().select(0, static_cast<int64_t>(i / es)).item() << " cpu "
                    << c.flatten().select(0, static_cast<int64_t>(i / es)).item();
      return;
    }
  }
}

class CudaRng : public ::testing::Test {
 protected:
  void SetUp() override { TCV_REQUIRE_CUDA(); }
};

TEST_F(CudaRng, RandAndUniformBitIdentical) {
  for (const DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (const Shape& shape : {Shape{1}, Shape{3}, Shape{7, 13}, Shape{100003}, Shape{0}}) {
      const std::string what = std::string(dtype_name(dt)) + " " + shape_str(shape);
      Generator gc(42), gg(42);
      Tensor c = rand(shape, {.dtype = dt}, &gc);
      Tensor g = rand(shape, {.dtype = dt, .device = kGpu}, &gg);
      expect_bitwise_equal(g, c, "rand " + what);
      EXPECT_EQ(gg.offset(), gc.offset()) << what;
      Tensor cu = uniform(shape, -2.5, 3.0, {.dtype = dt}, &gc);
      Tensor gu = uniform(shape, -2.5, 3.0, {.dtype = dt, .device = kGpu}, &gg);
      expect_bitwise_equal(gu, cu, "uniform " + what);
      EXPECT_EQ(gg.offset(), gc.offset()) << what;
      // The next draw (on the CPU for both) is equal too.
      expect_bitwise_equal(rand({5}, {}, &gg).to(kGpu), rand({5}, {}, &gc), "next " + what);
    }
  }
}

TEST_F(CudaRng, RandnWithin1e6) {
  for (const DType dt : {DType::f32, DType::f64}) {
    for (const Shape& shape : {Shape{1}, Shape{5}, Shape{31, 7}, Shape{200001}, Shape{0}}) {
      const std::string what = std::string(dtype_name(dt)) + " " + shape_str(shape);
      Generator gc(7), gg(7);
      Tensor c = randn(shape, {.dtype = dt}, &gc);
      Tensor g = randn(shape, {.dtype = dt, .device = kGpu}, &gg);
      ASSERT_TRUE(g.device().is_cuda());
      testing::expect_close(g.to(kCPU), c, 1e-6, 1e-6, "randn " + what);
      EXPECT_EQ(gg.offset(), gc.offset()) << what;
      Tensor cn = normal(shape, 3.0, 0.5, {.dtype = dt}, &gc);
      Tensor gn = normal(shape, 3.0, 0.5, {.dtype = dt, .device = kGpu}, &gg);
      testing::expect_close(gn.to(kCPU), cn, 1e-6, 1e-6, "normal " + what);
      EXPECT_EQ(gg.offset(), gc.offset()) << what;
      // The next draw, on the GPU for both.
      expect_bitwise_equal(rand({9}, {.device = kGpu}, &gg), rand({9}, {}, &gc), "next " + what);
    }
  }
  // 16-bit outputs: within the type's rounding.
  Generator gc(9), gg(9);
  Tensor c = randn({1001}, {.dtype = DType::bf16}, &gc);
  Tensor g = randn({1001}, {.dtype = DType::bf16, .device = kGpu}, &gg);
  testing::expect_close(g.to(kCPU).to(DType::f32), c.to(DType::f32), 1e-6, 1e-2, "randn bf16");
}

TEST_F(CudaRng, RandintIdentical) {
  for (const DType dt : {DType::i64, DType::i32}) {
    Generator gc(3), gg(3);
    Tensor c = randint(-5, 1000003, {4097}, {.dtype = dt}, &gc);
    Tensor g = randint(-5, 1000003, {4097}, {.dtype = dt, .device = kGpu}, &gg);
    expect_bitwise_equal(g, c, std::string("randint ") + dtype_name(dt));
    EXPECT_EQ(gg.offset(), gc.offset());
    Tensor c2 = randint(0, 2, {3, 5}, {.dtype = dt}, &gc);
    Tensor g2 = randint(0, 2, {3, 5}, {.dtype = dt, .device = kGpu}, &gg);
    expect_bitwise_equal(g2, c2, "randint {0, 1}");
    expect_bitwise_equal(randint(0, 100, {7}, {.device = kGpu}, &gg),
                         randint(0, 100, {7}, {.dtype = DType::i64}, &gc).to(DType::f32),
                         "next randint");
  }
}

TEST_F(CudaRng, InPlaceInitialisers) {
  Generator gc(11), gg(11);
  Tensor c = empty({17, 9});
  Tensor g = empty({17, 9}, {.device = kGpu});
  uniform_(c, -0.1, 0.1, &gc);
  uniform_(g, -0.1, 0.1, &gg);
  expect_bitwise_equal(g, c, "uniform_");
  // A non-contiguous target.
  Tensor ct = empty({9, 17}).t(), gt = empty({9, 17}, {.device = kGpu}).t();
  normal_(ct, 0.0, 0.02, &gc);
  normal_(gt, 0.0, 0.02, &gg);
  testing::expect_close(gt.to(kCPU), ct, 1e-7, 1e-6, "normal_ transposed");
  EXPECT_EQ(gg.offset(), gc.offset());
}

TEST_F(CudaRng, DefaultGenerator) {
  manual_seed(1234);
  Tensor c = rand({333});
  const uint64_t off = default_generator().offset();
  manual_seed(1234);
  Tensor g = rand({333}, {.device = kGpu});
  EXPECT_EQ(default_generator().offset(), off);
  expect_bitwise_equal(g, c, "default generator");
}

TEST_F(CudaRng, DropoutMatchesCpu) {
  for (const DType dt : {DType::f32, DType::f64, DType::f16}) {
    for (const double p : {0.1, 0.5, 0.9}) {
      const std::string what = std::string(dtype_name(dt)) + " p=" + std::to_string(p);
      Generator gx(1);
      Tensor x = randn({37, 129}, {.dtype = dt}, &gx);
      Tensor xc = x.clone().set_requires_grad(true);
      Tensor xg = x.to(kGpu).set_requires_grad(true);
      Generator gc(77), gg(77);
      Tensor yc = ops::dropout(xc, {.p = p, .generator = &gc});
      Tensor yg = ops::dropout(xg, {.p = p, .generator = &gg});
      expect_bitwise_equal(yg, yc, "dropout " + what);
      EXPECT_EQ(gg.offset(), gc.offset()) << what;
      Tensor dy = randn({37, 129}, {.dtype = dt}, &gx);
      yc.backward(dy);
      yg.backward(dy.to(kGpu));
      expect_bitwise_equal(xg.grad(), xc.grad(), "dropout grad " + what);
    }
  }
  // Transposed input: the mask follows the logical (row-major) order, as on the CPU.
  Generator gx(2);
  Tensor x = randn({20, 30}, {}, &gx);
  Generator gc(5), gg(5);
  Tensor yc = ops::dropout(x.t(), {.p = 0.3, .generator = &gc});
  Tensor yg = ops::dropout(x.to(kGpu).t(), {.p = 0.3, .generator = &gg});
  expect_bitwise_equal(yg, yc, "dropout transposed");
  // Not training, p = 0 and p = 1 behave as on the CPU.
  Tensor xg = x.to(kGpu);
  EXPECT_TRUE(ops::dropout(xg, {.p = 0.5, .training = false, .generator = &gg}).same(xg));
  testing::expect_close(ops::dropout(xg, {.p = 1.0, .generator = &gg}).to(kCPU), zeros({20, 30}), 0,
                        0, "dropout p=1");
  // Empty input.
  EXPECT_EQ(ops::dropout(empty({0, 4}, {.device = kGpu}), {.p = 0.5, .generator = &gg}).numel(), 0);
}

}  // namespace
}  // namespace tcv
