// dropout2d on CUDA beyond the op table's cases (tests/ops/cases_norm.cpp,
// which compare outputs and gradients with the CPU's from the same generator
// state): the generator advances by the same amount on both devices, and
// evaluation returns the input.
#include <gtest/gtest.h>

#include <string>

#include "engine/ops.h"
#include "engine/rng.h"
#include "support/cuda_compare.h"

namespace tcv {
namespace {

const Device kGpu(DeviceType::CUDA, 0);

TEST(CudaDropout2d, GeneratorAdvancesAsOnTheCpu) {
  TCV_REQUIRE_CUDA();
  for (const Shape& shape : {Shape{4, 33, 5, 7}, Shape{2, 3, 4, 5, 6}, Shape{0, 3, 2, 2}}) {
    Generator gc(31), gg(31);
    ops::dropout2d(ones(shape), 0.5, true, &gc);
    ops::dropout2d(ones(shape, {.device = kGpu}), 0.5, true, &gg);
    EXPECT_EQ(gg.offset(), gc.offset()) << shape_str(shape);
  }
  Tensor x = ones({2, 3, 4, 4}, {.device = kGpu});
  EXPECT_TRUE(ops::dropout2d(x, 0.5, false).same(x));
}

}  // namespace
}  // namespace tcv
