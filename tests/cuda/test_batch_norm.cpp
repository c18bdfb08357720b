// batch_norm on CUDA against the CPU: training with batch statistics and the
// running-stat update (running_mean/var compared after the call), eval with
// running statistics, eval without running statistics (batch stats), with and
// without weight/bias, 2-D, 3-D and 4-D inputs, odd sizes, a large N·H·W that
// splits every channel over many blocks, a non-contiguous input; f32 and f64,
// gradients of x, weight and bias.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "engine/rng.h"
#include "support/cuda_compare.h"

namespace tcv {
namespace {

using testing::CudaCompareOptions;
using testing::expect_cuda_matches_cpu;
using TVec = std::vector<Tensor>;

Tensor input(const Shape& shape, uint64_t seed, DType dt, bool grad, double lo = -2.0,
             double hi = 2.0) {
  return testing::random_input(shape, seed, dt, grad, lo, hi);
}

CudaCompareOptions tol_for(DType dt) {
  CudaCompareOptions o;
  if (dt == DType::f64) {
    o.rtol = 1e-10;
    o.atol = 1e-10;
  } else {
    o.rtol = 1e-4;
    o.atol = 1e-4;
  }
  return o;
}

/// inputs: x, weight, bias, running_mean, running_var. Returns y and the running
/// statistics after the call.
TVec bn_inputs(const Shape& x, uint64_t seed, DType dt) {
  const int64_t c = x[1];
  return {input(x, seed, dt, true, -1.0, 3.0), input({c}, seed + 1, dt, true, 0.5, 1.5),
          input({c}, seed + 2, dt, true), input({c}, seed + 3, dt, false, -0.5, 0.5),
          input({c}, seed + 4, dt, false, 0.5, 2.0)};
}

TEST(CudaBatchNorm, TrainingUpdatesRunningStats) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64}) {
    for (const Shape& s : {Shape{4, 3, 7, 5}, Shape{5, 6}, Shape{3, 4, 11}, Shape{1, 2, 3, 3}}) {
      expect_cuda_matches_cpu(
          std::string("train ") + dtype_name(dt),
          [](const TVec& v) {
            Tensor y = ops::batch_norm(v[0], v[1], v[2], v[3], v[4], true, 0.1, 1e-5);
            return TVec{y, v[3].clone(), v[4].clone()};
          },
          bn_inputs(s, 10, dt), tol_for(dt));
    }
  }
}

TEST(CudaBatchNorm, TrainingLargePlanesManyBlocks) {
  TCV_REQUIRE_CUDA();
  // 8·96·96 = 73728 values per channel, with an offset that tests the variance's accuracy.
  TVec in = bn_inputs({8, 3, 96, 96}, 20, DType::f32);
  in[0] = ops::add(in[0].detach(), 10.0);
  in[0].set_requires_grad(true);
  auto o = tol_for(DType::f32);
  o.atol = 1e-3;
  expect_cuda_matches_cpu(
      "train large",
      [](const TVec& v) {
        Tensor y = ops::batch_norm(v[0], v[1], v[2], v[3], v[4], true, 0.3, 1e-3);
        return TVec{y, v[3].clone(), v[4].clone()};
      },
      in, o);
}

TEST(CudaBatchNorm, Eval) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64}) {
    expect_cuda_matches_cpu(
        std::string("eval ") + dtype_name(dt),
        [](const TVec& v) { return ops::batch_norm(v[0], v[1], v[2], v[3], v[4], false); },
        bn_inputs({3, 5, 6, 7}, 30, dt), tol_for(dt));
    // Without running statistics eval normalizes with the batch.
    expect_cuda_matches_cpu(
        std::string("eval no running stats ") + dtype_name(dt),
        [](const TVec& v) { return ops::batch_norm(v[0], v[1], v[2], Tensor(), Tensor(), false); },
        bn_inputs({3, 5, 6, 7}, 40, dt), tol_for(dt));
  }
}

TEST(CudaBatchNorm, NoAffineAndNonContiguous) {
  TCV_REQUIRE_CUDA();
  expect_cuda_matches_cpu(
      "no weight/bias",
      [](const TVec& v) {
        Tensor y = ops::batch_norm(v[0], Tensor(), Tensor(), v[3], v[4], true, 0.1, 1e-5);
        return TVec{y, v[3].clone(), v[4].clone()};
      },
      bn_inputs({2, 4, 5, 9}, 50, DType::f32), tol_for(DType::f32));
  expect_cuda_matches_cpu(
      "transposed input",
      [](const TVec& v) {
        Tensor y = ops::batch_norm(v[0].transpose(2, 3), v[1], v[2], v[3], v[4], true, 0.1, 1e-5);
        return TVec{y, v[3].clone(), v[4].clone()};
      },
      bn_inputs({3, 4, 6, 5}, 60, DType::f32), tol_for(DType::f32));
  // Only weight requires grad: dx and dbias are not computed.
  TVec in = bn_inputs({3, 4, 6, 5}, 70, DType::f64);
  in[0] = in[0].detach();
  in[2] = in[2].detach();
  expect_cuda_matches_cpu(
      "dweight only",
      [](const TVec& v) { return ops::batch_norm(v[0], v[1], v[2], v[3], v[4], true); }, in,
      tol_for(DType::f64));
}

}  // namespace
}  // namespace tcv
