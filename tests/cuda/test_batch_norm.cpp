// batch_norm on CUDA beyond the op table's cases (tests/ops/cases_norm.cpp): a
// large N·H·W that splits every channel over many blocks (with an offset that
// tests the variance's accuracy), and the kernels' 64-bit index variants,
// which need 2^31 elements on their own. Bounds: batch_norm_bound.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "support/cuda_compare.h"
#include "support/op_bounds.h"

namespace tcv {
namespace {

using namespace testing;
using TVec = std::vector<Tensor>;

/// inputs: x, weight, bias, running_mean, running_var.
TVec bn_inputs(const Shape& x, uint64_t seed, DType dt) {
  const int64_t c = x[1];
  return {testing::random_input(x, seed, dt, true, -1.0, 3.0),
          testing::random_input({c}, seed + 1, dt, true, 0.5, 1.5),
          testing::random_input({c}, seed + 2, dt, true),
          testing::random_input({c}, seed + 3, dt, false, -0.5, 0.5),
          testing::random_input({c}, seed + 4, dt, false, 0.5, 2.0)};
}

/// y and the running statistics after the call.
testing::MultiFn bn(const BatchNormCall& call) {
  return [call](const TVec& v) {
    Tensor y =
        ops::batch_norm(v[0], v[1], v[2], v[3], v[4],
                        {.training = call.training, .momentum = call.momentum, .eps = call.eps});
    if (!call.training) return TVec{y};
    return TVec{y, v[3].clone(), v[4].clone()};
  };
}

TEST(CudaBatchNorm, TrainingLargePlanesManyBlocks) {
  TCV_REQUIRE_CUDA();
  // 8·96·96 = 73728 values per channel, around 10.
  TVec in = bn_inputs({8, 3, 96, 96}, 20, DType::f32);
  in[0] = ops::add(in[0].detach(), 10.0).set_requires_grad(true);
  const BatchNormCall call{.momentum = 0.3, .eps = 1e-3};
  expect_cuda_matches_cpu("train large", bn(call), in, {.bound = testing::batch_norm_bound(call)});
}

// The GPU check also reruns this file and the op table with TCV_CUDA_WIDE_INDICES=1.
TEST(CudaBatchNorm, WideIndicesMatchTheCpu) {
  TCV_REQUIRE_CUDA();
  const testing::WideIndicesScope wide;
  for (DType dt : {DType::f32, DType::f64}) {
    for (const Shape& s : {Shape{4, 3, 7, 5}, Shape{3, 5, 4, 2}, Shape{5, 6}}) {
      for (bool training : {true, false}) {
        const BatchNormCall call{.training = training};
        expect_cuda_matches_cpu(std::string(training ? "wide train " : "wide eval ") +
                                    dtype_name(dt) + " " + shape_str(s),
                                bn(call), bn_inputs(s, training ? 70 : 80, dt),
                                {.bound = testing::batch_norm_bound(call)});
      }
    }
  }
}

}  // namespace
}  // namespace tcv
