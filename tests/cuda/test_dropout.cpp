// dropout2d on CUDA against the CPU: with the same generator state both drop
// the same channels (the keep draws are rand((N, C)), bit-identical on both
// devices), outputs and gradients equal, f32, f64 and f16, 4-D and 5-D inputs;
// the generator advances by the same amount.
#include <gtest/gtest.h>

#include <string>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "support/cuda_compare.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

const Device kGpu(DeviceType::CUDA, 0);

TEST(CudaDropout2d, MatchesCpu) {
  TCV_REQUIRE_CUDA();
  for (const DType dt : {DType::f32, DType::f64, DType::f16}) {
    for (const Shape& shape : {Shape{4, 33, 5, 7}, Shape{2, 3, 4, 5, 6}, Shape{0, 3, 2, 2}}) {
      for (const double p : {0.1, 0.5, 1.0}) {
        const std::string what =
            std::string(dtype_name(dt)) + " " + shape_str(shape) + " p=" + std::to_string(p);
        Generator gx(3);
        Tensor x = randn(shape, {.dtype = dt}, &gx);
        Tensor xc = x.clone().set_requires_grad(true);
        Tensor xg = x.to(kGpu).set_requires_grad(true);
        Generator gc(31), gg(31);
        Tensor yc = ops::dropout2d(xc, p, true, &gc);
        Tensor yg = ops::dropout2d(xg, p, true, &gg);
        EXPECT_EQ(gg.offset(), gc.offset()) << what;
        // Each output is x times the same scale on both devices: exact.
        testing::expect_close(yg.to(kCPU), yc, 0, 0, what);
        Tensor dy = randn(shape, {.dtype = dt}, &gx);
        yc.backward(dy);
        yg.backward(dy.to(kGpu));
        testing::expect_close(xg.grad().to(kCPU), xc.grad(), 0, 0, what + " grad");
      }
    }
  }
  Tensor x = ones({2, 3, 4, 4}, {.device = kGpu});
  EXPECT_TRUE(ops::dropout2d(x, 0.5, false).same(x));
}

}  // namespace
}  // namespace tcv
